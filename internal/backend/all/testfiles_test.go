package all

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// repoRoot is where the walked directories and a cover's test packages
// are found from; tests run in this package's directory.
const repoRoot = "../../.."

// walked are the directories, relative to repoRoot, whose files must each
// have a test: the controller and every backend package below
// internal/backend.
var walked = []string{"internal/controller", "internal/backend"}

// TestEveryFileHasItsTest: each non-test file of the controller and the
// backends has a test file of the same name, or an entry in covered that
// names the tests that run its code. A file added without either fails
// here, and so does an entry that no longer matches a file or a test.
func TestEveryFileHasItsTest(t *testing.T) {
	for _, p := range layoutProblems(repoRoot, walked, covered) {
		t.Error(p)
	}
}

// TestLayoutCheckFails: the check above is only worth something if it
// can fail; on a small tree it reports each kind of problem.
func TestLayoutCheckFails(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const code = "package x\n\nfunc f() {}\n"
	write("internal/backend/x/tested.go", code)
	write("internal/backend/x/tested_test.go", "package x\nimport \"testing\"\nfunc TestTested(t *testing.T) {}\n")
	write("internal/backend/x/covered.go", code)
	write("internal/backend/x/added.go", code)
	write("internal/backend/x/wrong.go", code)
	write("internal/backend/x/doubled.go", code)
	write("internal/backend/x/doubled_test.go", "package x\n")
	write("internal/backend/x/testdata/data.go", "package ignored\n")
	write("internal/backend/x/doc.go", "// Package x is a test.\npackage x\n")
	write("test/e2e/e2e_test.go", "package e2e\nimport \"testing\"\nfunc TestEndToEnd(t *testing.T) {}\n")
	table := map[string]cover{
		"backend/x/covered.go": {[]string{"TestTested", "test/e2e.TestEndToEnd"}, "runs it"},
		"backend/x/wrong.go":   {[]string{"TestGone", "test/e2e.TestTested"}, "runs it"},
		"backend/x/doubled.go": {[]string{"TestTested"}, "runs it"},
		"backend/x/removed.go": {[]string{"TestTested"}, "runs it"},
		"backend/x/tested.go":  {nil, ""},
	}
	got := layoutProblems(root, []string{"internal/backend"}, table)
	want := []string{
		"backend/x/added.go: no added_test.go and no entry in covered",
		"backend/x/doubled.go: has doubled_test.go; drop its entry in covered",
		"backend/x/removed.go: entry in covered names no file",
		"backend/x/tested.go: entry in covered names no test",
		"backend/x/tested.go: entry in covered says not why",
		"backend/x/tested.go: has tested_test.go; drop its entry in covered",
		"backend/x/wrong.go: names TestGone, not a test in internal/backend/x",
		"backend/x/wrong.go: names TestTested, not a test in test/e2e",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// cover is why a file needs no test file of its own: the tests that run
// its code (a bare name is a test of the file's own package, "dir.TestX"
// one in repoRoot/dir) and what they show of it.
type cover struct {
	tests []string
	why   string
}

// layoutProblems lists, sorted, each file under dirs with neither a
// same-named test file nor an entry in table, and each entry in table
// that is stale or names a test that does not exist. Keys of table are
// paths below internal/.
func layoutProblems(root string, dirs []string, table map[string]cover) []string {
	var problems []string
	seen := map[string]bool{}
	for _, dir := range dirs {
		filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				problems = append(problems, err.Error())
				return nil
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			name := d.Name()
			if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || !declares(path) {
				return nil
			}
			rel, _ := filepath.Rel(filepath.Join(root, "internal"), path)
			key := filepath.ToSlash(rel)
			seen[key] = true
			testFile := strings.TrimSuffix(name, ".go") + "_test.go"
			_, own := os.Stat(filepath.Join(filepath.Dir(path), testFile))
			_, listed := table[key]
			switch {
			case own == nil && listed:
				problems = append(problems, key+": has "+testFile+"; drop its entry in covered")
			case own != nil && !listed:
				problems = append(problems, key+": no "+testFile+" and no entry in covered")
			}
			return nil
		})
	}
	tests := map[string]map[string]bool{}
	for key, c := range table {
		if !seen[key] {
			problems = append(problems, key+": entry in covered names no file")
			continue
		}
		if len(c.tests) == 0 {
			problems = append(problems, key+": entry in covered names no test")
		}
		if strings.TrimSpace(c.why) == "" {
			problems = append(problems, key+": entry in covered says not why")
		}
		for _, name := range c.tests {
			dir := filepath.ToSlash(filepath.Join("internal", filepath.Dir(key)))
			if i := strings.LastIndex(name, "."); i >= 0 {
				dir, name = name[:i], name[i+1:]
			}
			if tests[dir] == nil {
				tests[dir] = testFuncs(filepath.Join(root, dir))
			}
			if !tests[dir][name] {
				problems = append(problems, key+": names "+name+", not a test in "+dir)
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// declares: the file has code to test (a doc.go holds only the package
// comment).
func declares(path string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	return err != nil || len(f.Decls) > 0
}

// testFuncs are the names of the Test functions declared in dir's test
// files.
func testFuncs(dir string) map[string]bool {
	names := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range af.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				names[fn.Name.Name] = true
			}
		}
	}
	return names
}

// covered lists the files with no test file of their own and the tests
// that run their code: found by the coverage of each controller test run
// alone, by the coverage of the plugin's and the backends' unit tests,
// and by reading the callers for the tests on real servers and end to
// end. A file whose logic is a pure decision that no table test decides
// gets a same-named test file instead.
var covered = map[string]cover{
	// controller: its reconcile runs on the fake backend (backend/fake)
	// against a real API server; the step and glue files are run by the
	// tests that drive whole reconciles.
	"controller/addkeys.go":           {[]string{"test/e2e.TestMySQLUserAdded", "internal/explorer.TestPathUserAdded", "test/e2e.TestCephInPlaceAdopt", "internal/explorer.TestCephInPlace"}, "a user added to a provisioned set, at rest and mid-rotation, and a Ceph key deleted from the source Secret read back, on real servers and in every state the explorer reaches (engine.DecideAdd has the table test)"},
	"controller/act.go":               {[]string{"TestEngineActions"}, "every engine action a reconcile takes goes through act"},
	"controller/cronjob.go":           {[]string{"test/e2e.TestCronJobConsumer"}, "a CronJob consumer's Jobs listed and judged (engine.CronJobRollout has the table test)"},
	"controller/gather.go":            {[]string{"TestEngineActions", "TestTargetReadOncePerReconcile", "test/e2e.TestCephInPlaceAdopt"}, "each reconcile gathers the set's Secrets and targets, reading each once, and asks an in-place backend before a recover"},
	"controller/idleupkeep.go":        {[]string{"TestEngineActions", "test/e2e.TestMySQLFullCycle", "test/e2e.TestCephInPlaceHandRotated"}, "an Idle set's repair runs after each rotation; a Ceph key changed by hand at rest is reported"},
	"controller/kube.go":              {[]string{"test/e2e.TestCephAdminRotationCrash", "test/e2e.TestMySQLFullCycle"}, "the view a backend's Build gets: Secrets the Ceph keyring store reads and claims, StatefulSets MySQL lists, the fence"},
	"controller/observe.go":           {[]string{"TestEngineActions", "TestTransitionCarriesCoverage"}, "what each reconcile observes before it decides"},
	"controller/plan.go":              {[]string{"TestExtraSecrets", "TestEngineActions"}, "the plan of Secrets and targets each reconcile builds"},
	"controller/provision.go":         {[]string{"TestEngineActions", "TestExtraSecrets"}, "a new set's first reconcile provisions it"},
	"controller/reconcile.go":         {[]string{"TestEngineActions", "TestUnidentifiedClusterHoldsOnlyRetirement"}, "the reconcile's order: gather, decide, run the step"},
	"controller/reconciler.go":        {[]string{"TestEngineActions", "TestBackedOffHoldsWakeUps", "TestStatusWaitingAfterAbort"}, "Reconcile's entry, backoff and status writes"},
	"controller/secrets.go":           {[]string{"TestEngineActions", "TestExtraSecrets", "TestTargetReadOncePerReconcile"}, "the source and distribution Secrets read and written each rotation"},
	"controller/status.go":            {[]string{"TestTransitionCarriesCoverage", "TestEngineActions", "test/e2e.TestStaleRecoverAfterRelease"}, "the status each step writes, never from a copy read before the set's deletion"},
	"controller/step_applying.go":     {[]string{"TestEngineActions", "TestTargetReadOncePerReconcile", "test/e2e.TestCephInPlaceHandRotated", "internal/explorer.TestCephInPlaceHand"}, "every rotation applies; an in-place rotation's lost keys are read back"},
	"controller/step_confirming.go":   {[]string{"TestEngineActions", "TestTransitionCarriesCoverage"}, "every rotation confirms"},
	"controller/step_discarding.go":   {[]string{"TestEngineActions", "TestUnidentifiedClusterHoldsOnlyRetirement"}, "every rotation discards; a held retirement waits here"},
	"controller/step_distributing.go": {[]string{"TestEngineActions", "TestTargetReadOncePerReconcile", "test/e2e.TestCephInPlaceHandRotated", "test/e2e.TestCephInPlaceRotationIDTakenAgain"}, "every rotation distributes, again after a read back or a restore, under a restart value of its own"},
	"controller/step_resetting.go":    {[]string{"TestEngineActions", "TestDeletionHoldsForUnaccountedSecond"}, "a reset owed runs"},
	"controller/step_rollingback.go":  {[]string{"TestEngineActions", "TestUnidentifiedClusterHoldsOnlyRetirement"}, "an aborted rotation rolls back"},
	"controller/tenancy.go":           {[]string{"test/e2e.TestCrossNamespaceConsent", "test/e2e.TestHostileTenant"}, "consent read from real Namespaces (tenancy.Decide has the table test); controller tests reach only the same-namespace path"},

	// Ceph: a real ceph-mon and the ceph CLI.
	"backend/ceph/alive_unix.go":  {[]string{"TestSweepWorkDir"}, "a crashed process's work folder is swept, a live one's kept"},
	"backend/ceph/alive_other.go": {[]string{"TestSweepWorkDir"}, "built only off unix, where the same test runs it; not built where CI runs"},
	"backend/ceph/auth.go":        {[]string{"TestInPlaceRotation", "TestOverlappingRotation", "TestAdminRotation"}, "every auth command on the real mon"},
	"backend/ceph/backend.go":     {[]string{"TestNewRefusesConfusingSpecs", "TestRender", "TestVersion", "TestInPlaceRotation"}, "New's refusals, Render, Version, and rotations on the real mon"},
	"backend/ceph/errors.go":      {[]string{"TestSanitizeAndClassify", "TestAdminError", "TestFailuresAreClassifiedWithoutKeys"}, "classify, sanitize and admin errors, in tables and from the real CLI"},
	"backend/ceph/keyring.go":     {[]string{"TestKeyringRoundTrip", "TestGenerationNames", "TestValidateConfig"}, "parsing, entity names and generations"},
	"backend/ceph/owner.go":       {[]string{"TestOwnershipOnTheRealMon", "TestDeprovisionOnTheRealMon"}, "claims, releases and refusals of another set's entities"},
	"backend/ceph/provision.go":   {[]string{"TestProvisionAdoptsAndChecks", "TestProvisionAdoptedOrMinted", "TestInPlaceNeedsAuthRotate"}, "Provision and Precheck on the real mon"},
	"backend/ceph/support.go":     {[]string{"TestInPlaceRefusal", "TestInPlaceNeedsAuthRotate"}, "the versions that rotate in place"},
	"backend/ceph/upkeep.go":      {[]string{"TestRepairIdleReportsAHandRotation", "test/e2e.TestCephInPlaceHandRotated"}, "a key rotated by hand reported at rest, on the real mon and through a manager (hand_test.go)"},
	"backend/ceph/unused.go":      {[]string{"TestRemoveUnusedKeys"}, "removes only the listed bootstrap keys"},
	"backend/ceph/verify.go":      {[]string{"TestInPlaceHandRotatedMidRotation", "TestOverlappingHandRotated", "test/e2e.TestCephInPlace", "test/e2e.TestCephOverlapping"}, "the engine verifies each distribution; a key changed by hand mid-rotation is refused naming the way out"},

	"backend/cephkube/cephkube.go": {[]string{"internal/controller.TestBackendLockKeys", "test/e2e.TestCephInPlace"}, "Build and the lock keys (controller package test); every Ceph set end to end"},
	"backend/cephkube/describe.go": {[]string{"internal/plugin.TestRotateDryRunCephInPlace", "internal/plugin.TestRotateDryRunCephOverlapping"}, "the plugin's plan of a Ceph rotation"},
	"backend/cephkube/formats.go":  {[]string{"internal/controller.TestTargetData", "test/e2e.TestCephCSIFormat"}, "the ceph-csi Secret format"},
	"backend/cephkube/keyring.go":  {[]string{"test/e2e.TestCephAdminRotationCrash"}, "the rotator and admin keyrings kept in Secrets through an admin rotation and a crash"},
	"backend/cephkube/show.go":     {[]string{"internal/plugin.TestShowCephFormats", "internal/plugin.TestShowCephOverlappingAndMissingKeys"}, "kubectl rekey show on Ceph sets"},

	"backend/fake/fake.go": {[]string{"internal/controller.TestEngineActions", "internal/controller.TestExtraSecrets"}, "the backend the controller's tests run on; faults a real server cannot make on demand"},

	"backend/mocokube/gate.go":    {[]string{"TestGate"}, "the backup Job gate"},
	"backend/mocokube/secrets.go": {[]string{"TestWriteOrderAndClaim", "TestWriteRefusesSecretNotMOCOs"}, "MOCO's Secrets written in order and refused when not MOCO's"},

	// MySQL: a real mysqld.
	"backend/mysql/observe.go":   {[]string{"TestTopologyOnRealMySQL", "TestErrantOnRealMySQL"}, "each instance's role and replication read on real servers"},
	"backend/mysql/owner.go":     {[]string{"TestDeletionOnRealMySQL"}, "the owner attribute written and honoured"},
	"backend/mysql/session.go":   {[]string{"TestRestoreSuperReadOnly", "TestRedactRemovesSecrets", "TestEveryRefusedUserNamedOnRealMySQL", "TestHostilePasswordsRoundTripOnRealMySQL"}, "super_read_only restored, errors redacted, logins and statements on a real server"},
	"backend/mysql/transport.go": {[]string{"TestTLSAgainstRealMySQL", "TestTLSSpecRefusals", "TestTLSTrouble"}, "TLS configurations and their failures"},

	"backend/mysqlkube/lockkeys.go":  {[]string{"internal/controller.TestBackendLockKeys"}, "MySQL's lock keys"},
	"backend/mysqlkube/mysqlkube.go": {[]string{"test/e2e.TestMySQLFullCycle", "test/e2e.TestMOCOSystemUsers"}, "Build of plain and MOCO sets end to end"},
	"backend/mysqlkube/show.go":      {[]string{"TestMycnfValueEscapes", "internal/plugin.TestShowPrintsCredentialFromDistributionSecret"}, "kubectl rekey show on MySQL sets"},

	// PostgreSQL: a real postgres.
	"backend/postgres/adopt.go":       {[]string{"TestAdoption", "TestSeveralLoginsAdoption", "TestRelease"}, "adoption proved, claimed and released"},
	"backend/postgres/backend.go":     {[]string{"TestRender", "TestInsecureTransport", "TestOverlappingRotation"}, "New, Render, transport, and a rotation"},
	"backend/postgres/conn.go":        {[]string{"TestTopologyRefusals", "TestBannerNotReflected", "TestOverlappingRotation"}, "connections, topology and their failures"},
	"backend/postgres/generations.go": {[]string{"TestOverlappingRotation", "TestRelease"}, "generations listed and removed"},
	"backend/postgres/names.go":       {[]string{"TestGenerationOf", "TestChecks", "TestLiteralRefusesQuotes"}, "names, literals and checks"},
	"backend/postgres/roles.go":       {[]string{"TestOverlappingRotation", "TestTerminateSessions", "TestReplicaGate", "TestErrorsInRekeysWords"}, "logins created, dropped, sessions ended, replay waited for"},
	"backend/postgres/rotation.go":    {[]string{"TestOverlappingRotation", "TestSeveralLogins", "TestRelease", "TestTermFencingOnRealPostgres"}, "Provision, Apply, Retire, Reset, Verify, Release on a real server"},
	"backend/postgres/verifier.go":    {[]string{"TestMD5Verifier", "TestVerifierRefusesWhatItCannotHash"}, "verifiers the server accepts, and refusals"},

	"backend/postgreskube/postgreskube.go": {[]string{"TestLockKeys", "test/e2e.TestPostgresRotation"}, "lock keys; Build end to end"},

	"backend/rabbitkube/describe.go":   {[]string{"internal/plugin.TestRotateDryRunRabbitMQ", "internal/plugin.TestShowRabbitMQFormats"}, "the plugin's plan and show of a RabbitMQ set"},
	"backend/rabbitkube/rabbitkube.go": {[]string{"internal/controller.TestBackendLockKeys", "test/e2e.TestRabbitMQCoverage"}, "lock keys; Build end to end"},

	// RabbitMQ: a real rabbitmq-server.
	"backend/rabbitmq/backend.go":  {[]string{"TestNewRejects", "TestNewSecrets", "TestInsecureTransport", "TestOnRealBroker"}, "New, secrets, transport, and a broker"},
	"backend/rabbitmq/login.go":    {[]string{"TestOnRealBroker", "TestCheckOnRealBroker"}, "logins tried on the broker"},
	"backend/rabbitmq/rotation.go": {[]string{"TestOnRealBroker", "TestOwnershipOnRealBroker", "TestUnreachable"}, "each rotation step on the broker, ownership refusals, an unreachable broker"},
	"backend/rabbitmq/verify.go":   {[]string{"TestOnRealBroker"}, "each distribution verified"},

	"backend/registry/describe.go": {[]string{"TestDiscardWhenAndUnknownFormat", "internal/plugin.TestRotateDryRunRabbitMQ"}, "the registry's descriptions used by the plugin"},
}
