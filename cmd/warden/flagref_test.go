package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var updateFlagRef = flag.Bool("update", false, "rewrite docs/flags.md from the command definitions")

const flagRefFile = "../../docs/flags.md"

// flagReference renders docs/flags.md: the flags of the commands that take
// a config file, each also a config key.
func flagReference() string {
	var b strings.Builder
	b.WriteString(`# Flags of warden serve and warden router

Every flag but ` + "`--config`" + ` is also a key of the config file (docs/operations.md,
"Configuration"). This page is generated from the command definitions by
` + "`go test ./cmd/warden -run TestFlagReference -update`" + `; the test fails when
the two differ.
`)
	for _, name := range []string{"serve", "router"} {
		cmd := configCommands()[name]()
		fmt.Fprintf(&b, "\n## warden %s\n\n| flag | type | default | meaning |\n| --- | --- | --- | --- |\n", name)
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			def := f.DefValue
			if def == "" || def == "[]" {
				def = "–"
			} else {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, f.Value.Type(), def, strings.ReplaceAll(f.Usage, "|", `\|`))
		})
	}
	return b.String()
}

// TestFlagReference: docs/flags.md lists exactly the flags of warden serve
// and warden router, with their types, defaults and help text.
func TestFlagReference(t *testing.T) {
	want := flagReference()
	if *updateFlagRef {
		if err := os.WriteFile(flagRefFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(flagRefFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/flags.md differs from the flags at line %d:\n have %s\n want %s\n(go test ./cmd/warden -run TestFlagReference -update rewrites it)", i+1, g, w)
			}
		}
	}
}
