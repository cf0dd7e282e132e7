package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// The SPDX 2.3 document (JSON) of one image, written from what the build
// put in it rather than from a scan: the manager's Go modules as its binary
// records them, the Go toolchain, and each Debian package with the sha256
// of the .deb its files came from.
type spdxDoc struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      spdxCreation   `json:"creationInfo"`
	Packages          []spdxPackage  `json:"packages"`
	Relationships     []spdxRelation `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string         `json:"SPDXID"`
	Name             string         `json:"name"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	Supplier         string         `json:"supplier,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	LicenseConcluded string         `json:"licenseConcluded"`
	LicenseDeclared  string         `json:"licenseDeclared"`
	CopyrightText    string         `json:"copyrightText"`
	ExternalRefs     []spdxRef      `json:"externalRefs,omitempty"`
	PrimaryPurpose   string         `json:"primaryPackagePurpose,omitempty"`
	Comment          string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelation struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + spdxIDChars.ReplaceAllString(name, "-")
}

func purl(ref string) []spdxRef {
	return []spdxRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: ref}}
}

func noAssertion(p spdxPackage) spdxPackage {
	p.LicenseConcluded, p.LicenseDeclared, p.CopyrightText = "NOASSERTION", "NOASSERTION", "NOASSERTION"
	if p.DownloadLocation == "" {
		p.DownloadLocation = "NOASSERTION"
	}
	return p
}

// imageSBOM describes the image of digest (its manifest's) for arch.
func imageSBOM(c config, arch, digest string, manager []byte, debs []debPkg) ([]byte, error) {
	bi, err := buildinfo.Read(bytes.NewReader(manager))
	if err != nil {
		return nil, fmt.Errorf("the manager's build information: %v", err)
	}
	hex := strings.TrimPrefix(digest, "sha256:")
	doc := spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("rekey-%s-linux-%s", c.version, arch),
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s/linux-%s/%s", c.home, c.version, arch, hex),
		CreationInfo: spdxCreation{Created: c.epoch.Format("2006-01-02T15:04:05Z"),
			Creators: []string{"Tool: rekey hack/release", "Organization: rekey"}},
	}
	image := "SPDXRef-Image"
	rel := func(a, t, b string) { doc.Relationships = append(doc.Relationships, spdxRelation{a, t, b}) }
	add := func(p spdxPackage) { doc.Packages = append(doc.Packages, noAssertion(p)) }
	rel("SPDXRef-DOCUMENT", "DESCRIBES", image)
	add(spdxPackage{SPDXID: image, Name: c.repo, VersionInfo: digest, PrimaryPurpose: "CONTAINER",
		Checksums:    []spdxChecksum{{"SHA256", hex}},
		ExternalRefs: purl(fmt.Sprintf("pkg:oci/%s@%s?arch=%s&repository_url=%s", path.Base(c.repo), url.QueryEscape(digest), arch, url.QueryEscape(c.repo)))})

	mgr := "SPDXRef-Manager"
	rel(image, "CONTAINS", mgr)
	var settings []string
	for _, s := range bi.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	add(spdxPackage{SPDXID: mgr, Name: bi.Main.Path, VersionInfo: c.version, PrimaryPurpose: "APPLICATION",
		DownloadLocation: c.home, Checksums: []spdxChecksum{{"SHA256", sha256Hex(manager)}},
		ExternalRefs: purl("pkg:golang/" + bi.Main.Path + "@" + c.version),
		Comment:      "/rekey in the image, built by " + bi.GoVersion + " (" + bi.Path + "), " + strings.Join(settings, " ")})
	stdlib := spdxID("go", "stdlib")
	rel(mgr, "STATIC_LINK", stdlib)
	add(spdxPackage{SPDXID: stdlib, Name: "stdlib", VersionInfo: bi.GoVersion, PrimaryPurpose: "LIBRARY",
		DownloadLocation: "https://go.dev/dl/", ExternalRefs: purl("pkg:golang/stdlib@" + bi.GoVersion)})
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		id := spdxID("go", m.Path+"-"+m.Version)
		rel(mgr, "STATIC_LINK", id)
		p := spdxPackage{SPDXID: id, Name: m.Path, VersionInfo: m.Version, PrimaryPurpose: "LIBRARY",
			ExternalRefs: purl("pkg:golang/" + m.Path + "@" + m.Version)}
		if m.Sum != "" {
			p.Comment = "go.sum " + m.Sum
		}
		if d.Replace != nil {
			p.Comment += " (replaces " + d.Path + " " + d.Version + ")"
		}
		add(p)
	}
	for _, d := range debs {
		id := spdxID("deb", d.Name)
		rel(image, "CONTAINS", id)
		debArch := strings.TrimSuffix(d.Filename[strings.LastIndex(d.Filename, "_")+1:], ".deb")
		p := spdxPackage{SPDXID: id, Name: d.Name, VersionInfo: d.Version, Supplier: "Organization: Debian",
			PrimaryPurpose:   "LIBRARY",
			DownloadLocation: strings.TrimSuffix(c.mirror, "/") + "/" + d.Filename,
			Checksums:        []spdxChecksum{{"SHA256", d.SHA256}},
			ExternalRefs:     purl(fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s&distro=debian-sid", d.Name, url.PathEscape(d.Version), debArch))}
		if len(d.Files) > 0 {
			p.Comment = "only " + strings.Join(d.Files, ", ") + " is in the image"
		}
		add(p)
	}
	return json.MarshalIndent(doc, "", "  ")
}
