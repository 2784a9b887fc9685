package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/wardenlock/warden/node"
)

// configCommands are the commands that take --config, built afresh.
func configCommands() map[string]func() *cobra.Command {
	return map[string]func() *cobra.Command{
		"serve": func() *cobra.Command {
			return newServeCmd(func(node.Config, serveFlags, *serveSecurity) error { return nil })
		},
		"router": routerCmd,
	}
}

// flagValue is a value for a flag of type typ: its zero, or another one
// (set), as YAML takes it and as the flag's String gives it back.
func flagValue(t *testing.T, f *pflag.Flag, set bool) (yamlValue any, str string) {
	t.Helper()
	switch typ := f.Value.Type(); {
	case typ == "bool" && set:
		return true, "true"
	case typ == "bool":
		return false, "false"
	case (typ == "int" || typ == "int64" || typ == "uint64") && set:
		return 7, "7"
	case typ == "int" || typ == "int64" || typ == "uint64":
		return 0, "0"
	case typ == "float64" && set:
		return 2.5, "2.5"
	case typ == "float64":
		return 0, "0"
	case typ == "string" && set:
		return "set-" + f.Name, "set-" + f.Name
	case typ == "string":
		return "", ""
	case typ == "duration" && set:
		return "7s", "7s"
	case typ == "duration":
		return "0s", "0s"
	case typ == "stringSlice" && set:
		return []string{"a:1", "b:2"}, "[a:1,b:2]"
	case typ == "stringSlice":
		return []string{}, "[]"
	default:
		t.Fatalf("flag --%s has type %s, which this test has no values for: add them", f.Name, typ)
		return nil, ""
	}
}

// settable lists the flags of cmd a config file may set.
func settable(cmd *cobra.Command) []*pflag.Flag {
	var out []*pflag.Flag
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !notInFile[f.Name] {
			out = append(out, f)
		}
	})
	return out
}

// writeConfig writes a config file giving every settable flag of cmd its
// zero or its set value.
func writeConfig(t *testing.T, cmd *cobra.Command, set bool) string {
	t.Helper()
	m := map[string]any{}
	for _, f := range settable(cmd) {
		m[f.Name], _ = flagValue(t, f, set)
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "warden.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// parseWithConfig parses args as cmd's command line and loads its config
// file as cmd does before it runs.
func parseWithConfig(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd.PreRunE(cmd, nil)
}

// A config file sets every flag of serve and router, zero included: a
// file that gives every flag its zero leaves each at zero (most defaults
// are not), and one that gives every flag another value sets each to it.
func TestConfigFileSetsEveryFlag(t *testing.T) {
	for name, newCmd := range configCommands() {
		for _, set := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/zero", true: "/set"}[set], func(t *testing.T) {
				cmd := newCmd()
				path := writeConfig(t, cmd, set)
				if err := parseWithConfig(t, cmd, "--config", path); err != nil {
					t.Fatal(err)
				}
				for _, f := range settable(cmd) {
					if _, want := flagValue(t, f, set); f.Value.String() != want {
						t.Errorf("--%s = %q after the file, want %q", f.Name, f.Value.String(), want)
					}
				}
			})
		}
	}
}

// A flag given on the command line beats the file, for every flag; the
// file beats the default.
func TestCommandLineBeatsConfigFile(t *testing.T) {
	for name, newCmd := range configCommands() {
		t.Run(name, func(t *testing.T) {
			cmd := newCmd()
			path := writeConfig(t, cmd, true)
			args := []string{"--config", path}
			for _, f := range settable(cmd) {
				_, zero := flagValue(t, f, false)
				if f.Value.Type() == "stringSlice" {
					zero = ""
				}
				args = append(args, "--"+f.Name+"="+zero)
			}
			if err := parseWithConfig(t, cmd, args...); err != nil {
				t.Fatal(err)
			}
			for _, f := range settable(cmd) {
				if _, want := flagValue(t, f, false); f.Value.String() != want {
					t.Errorf("--%s = %q, want the command line's %q over the file's", f.Name, f.Value.String(), want)
				}
			}
		})
	}
	cmd := configCommands()["serve"]()
	path := filepath.Join(t.TempDir(), "warden.yaml")
	os.WriteFile(path, []byte("shards: 16\nrtt-ms: 20\n"), 0o600)
	if err := parseWithConfig(t, cmd, "--config", path, "--shards", "4"); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"shards": "4", "rtt-ms": "20", "namespace-depth": "2"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %s, want %s (command line > file > default)", flag, got, want)
		}
	}
}

// A file key that is not a flag, a value the flag refuses, a key given
// twice or a file that is not a map of keys is an error naming the key
// (and its line).
func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		key        string // "": an error without a key
		line       int
		unknown    bool
	}{
		{name: "unknown key", file: "id: 2\nnope: 1\n", key: "nope", line: 2, unknown: true},
		{name: "unknown key in a section", file: "identity:\n  leases: 1\n  nope: 2\n", key: "identity-nope", line: 3, unknown: true},
		{name: "config names another", file: "config: other.yaml\n", key: "config", line: 1, unknown: true},
		{name: "bad number", file: "shards: many\n", key: "shards", line: 1},
		{name: "bad bool", file: "no-audit: sometimes\n", key: "no-audit", line: 1},
		{name: "null number", file: "rtt-ms:\n", key: "rtt-ms", line: 1},
		{name: "given twice", file: "identity-leases: 1\nidentity:\n  leases: 2\n", key: "identity-leases", line: 3},
		{name: "list of maps", file: "members:\n  - {id: 1}\n", key: "members", line: 1},
		{name: "not a map", file: "- id\n- 1\n"},
		{name: "not YAML", file: "id: [1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "warden.yaml")
			os.WriteFile(path, []byte(tc.file), 0o600)
			_, err := tryServeConfig([]string{"--plaintext", "--config", path})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.key == "" {
				return
			}
			var ke *configKeyError
			if !errors.As(err, &ke) || ke.Key != tc.key || ke.Line != tc.line {
				t.Fatalf("err = %v, want one for key %s at line %d", err, tc.key, tc.line)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("message %q does not name the key %s", err, tc.key)
			}
			if errors.Is(err, errUnknownKey) != tc.unknown {
				t.Fatalf("errors.Is(err, errUnknownKey) = %v", !tc.unknown)
			}
		})
	}
}

// Values from the file reach the node config: zero values that are not the
// defaults, lists, sections, and the security flags.
func TestServeConfigFileReachesTheNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.yaml")
	file := `plaintext: true
id: 3
shards: 0
namespace-depth: 0
audit-max-bytes: 0
members: ["1=10.0.0.1:7170", "2=10.0.0.2:7170", "3=10.0.0.3:7170"]
identity:
  leases: 7
max-conns-per-addr: 0
`
	os.WriteFile(path, []byte(file), 0o600)
	cfg := serveConfig(t, []string{"--config", path})
	if cfg.ID != 3 || cfg.DataShards != 0 || cfg.NamespaceDepth != 0 || cfg.Audit.MaxBytes != 0 {
		t.Errorf("id %d, shards %d, namespace depth %d, audit max bytes %d: want 3 and zeros", cfg.ID, cfg.DataShards, cfg.NamespaceDepth, cfg.Audit.MaxBytes)
	}
	if len(cfg.Members) != 3 || cfg.Members[2] != (node.Member{ID: 3, RaftAddr: "10.0.0.3:7170"}) {
		t.Errorf("members %+v", cfg.Members)
	}
	if cfg.SM.MaxOwnerLeases != 7 || cfg.Router.Security.MaxConnsPerAddr != 0 {
		t.Errorf("identity leases %d, max conns per addr %d", cfg.SM.MaxOwnerLeases, cfg.Router.Security.MaxConnsPerAddr)
	}
}

// The example config of ops/systemd/warden.service is read by the unit's
// own command line.
func TestSystemdUnitConfig(t *testing.T) {
	b, err := os.ReadFile("../../ops/systemd/warden.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	_, example, ok := strings.Cut(unit, "for example:\n#\n")
	if !ok {
		t.Fatal("no example config in the unit file")
	}
	var yamlText strings.Builder
	for _, l := range strings.Split(example, "\n") {
		l, ok := strings.CutPrefix(l, "#   ")
		if !ok {
			break
		}
		yamlText.WriteString(l + "\n")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "warden.yaml")
	os.WriteFile(config, []byte(yamlText.String()), 0o600)
	exec := regexp.MustCompile(`(?m)^ExecStart=\S+ serve (.*)$`).FindStringSubmatch(unit)
	if exec == nil {
		t.Fatal("no ExecStart=... serve line")
	}
	args := strings.Fields(strings.NewReplacer("/etc/warden/warden.yaml", config, "/etc/warden/tls", dir).Replace(exec[1]))
	cfg := serveConfig(t, args)
	if cfg.ID != 1 || cfg.DataDir != "/var/lib/warden" || cfg.ClientAddr != "10.0.0.1:7070" || len(cfg.Members) != 3 || cfg.TLS == nil {
		t.Errorf("from the unit's example: id %d, data dir %s, listen %s, members %v, TLS %v", cfg.ID, cfg.DataDir, cfg.ClientAddr, cfg.Members, cfg.TLS != nil)
	}
}
