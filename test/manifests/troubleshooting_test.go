package manifests

// docs/troubleshooting.md is the alerts' runbook: every alert links to a
// section that exists, and every Warning reason has a section that says
// what it means, what to check and the next step.

import (
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const troubleshootingFile = "docs/troubleshooting.md"

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// punctuation but hyphens and underscores dropped, spaces as hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"`InstanceUnreachable`": "instanceunreachable", "Is the manager running?": "is-the-manager-running",
		"RekeyCredentialsOverdue": "rekeycredentialsoverdue", "Backing up the source Secrets": "backing-up-the-source-secrets",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// markdownSections maps each heading's anchor to the text under it (up to
// the next heading).
func markdownSections(doc string) map[string]string {
	out := map[string]string{}
	anchor := ""
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			anchor = githubAnchor(strings.TrimLeft(line, "#"))
			out[anchor] = ""
			continue
		}
		out[anchor] += line + "\n"
	}
	return out
}

// TestTroubleshootingIsTheRunbook: every alert of both rule sets has a
// runbook_url under the chart's default base, whose anchor is a section of
// docs/troubleshooting.md (a per-reason anchor: the section of every
// Warning reason); every Warning reason of internal/reason has a section
// with what it means, what to check and the next step; the default base
// names that very file; and the page cites nothing a user cannot open.
func TestTroubleshootingIsTheRunbook(t *testing.T) {
	doc := string(readFile(t, troubleshootingFile))
	sections := markdownSections(doc)
	_, warning := reasons(t)
	for _, r := range warning {
		body, ok := sections[strings.ToLower(r)]
		if !ok {
			t.Errorf("%s has no section for the Warning reason %s (a heading ### `%s`)", troubleshootingFile, r, r)
			continue
		}
		for _, part := range []string{"**What it means.**", "**Check.**", "**Next step.**"} {
			if !strings.Contains(body, part) {
				t.Errorf("%s: the section of %s lacks %s", troubleshootingFile, r, part)
			}
		}
	}

	var values struct {
		Metrics struct {
			Alerts struct {
				RunbookBaseURL string `json:"runbookBaseURL"`
			} `json:"alerts"`
		} `json:"metrics"`
	}
	if err := yaml.Unmarshal(readFile(t, chartDir+"/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	base := values.Metrics.Alerts.RunbookBaseURL
	if !strings.HasPrefix(base, "https://") || !strings.HasSuffix(base, "/"+troubleshootingFile) {
		t.Errorf("metrics.alerts.runbookBaseURL %q: want the https address of %s", base, troubleshootingFile)
	}
	kobjs, err := decode(kustomizeRulesFile, readFile(t, kustomizeRulesFile))
	if err != nil || len(kobjs) != 1 {
		t.Fatalf("%s: %v", kustomizeRulesFile, err)
	}
	perReason := "#{{ $labels.reason | toLower }}"
	for what, rules := range map[string][]map[string]any{
		kustomizeRulesFile:           alertRules(t, kustomizeRulesFile, kobjs[0].raw),
		"the chart's PrometheusRule": chartAlertRules(t, map[string]any{}),
	} {
		for _, r := range rules {
			annotations, _ := r["annotations"].(map[string]any)
			url, _ := annotations["runbook_url"].(string)
			anchor, ok := strings.CutPrefix(url, base+"#")
			switch {
			case !ok:
				t.Errorf("%s: alert %v has runbook_url %q, want %s#<section>", what, r["alert"], url, base)
			case "#"+anchor == perReason:
				// Every reason a refusal carries is a Warning reason: each has a section (above).
			case sections[anchor] == "":
				t.Errorf("%s: alert %v links to #%s, which is no section of %s", what, r["alert"], anchor, troubleshootingFile)
			}
		}
	}

	// Links to other pages' sections resolve.
	link := regexp.MustCompile(`\]\(([a-z.-]*\.md)?#([a-z0-9_-]+)\)`)
	for _, m := range link.FindAllStringSubmatch(doc, -1) {
		target := sections
		if m[1] != "" {
			target = markdownSections(string(readFile(t, "docs/"+m[1])))
		}
		if _, ok := target[m[2]]; !ok {
			t.Errorf("%s links to %s#%s, which has no such section", troubleshootingFile, m[1], m[2])
		}
	}
	for _, banned := range []*regexp.Regexp{regexp.MustCompile(`(?i)\bissue\s*#?\d`), regexp.MustCompile(`(?i)\bseed\b`), regexp.MustCompile(`DESIGN\.md`)} {
		if loc := banned.FindString(doc); loc != "" {
			t.Errorf("%s cites %q, which a user cannot open", troubleshootingFile, loc)
		}
	}
}

// TestChartNotes: what helm install prints shows the plugin's commands, the
// manager's Deployment by its name and where the troubleshooting page is,
// not a hand-written annotation.
func TestChartNotes(t *testing.T) {
	notes, err := renderNotes(t, "rekey", operatorNamespace, map[string]any{"metrics": map[string]any{"alerts": map[string]any{"runbookBaseURL": "https://wiki.example.com/rekey"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl rekey status", "kubectl rekey rotate", "kubectl rekey discard", "Deployment rekey-controller-manager, 2 replica(s)", "https://wiki.example.com/rekey"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "kubectl annotate") || strings.Contains(notes, "<no value>") {
		t.Errorf("NOTES.txt tells to annotate by hand, or renders a missing value:\n%s", notes)
	}
}
