package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// A config file sets a command's flags: each key is a flag's long name, and
// its value is what the flag takes on the command line, handed to the
// flag's own Set, so every flag can be set from a file, zero included, and
// a new flag needs no code here. A section (a key whose value is a map)
// prefixes its keys with its name and a dash: `identity: {leases: 7}` is
// `identity-leases: 7`. A list is its items joined by commas, as on the
// command line (`members: ["1=a:7170", "2=b:7170"]`). Precedence: a flag's
// default, then the file, then the command line.

// errUnknownKey: a config file key that is not a flag of the command.
var errUnknownKey = errors.New("not a flag of this command")

// configKeyError is a config file key that could not be set.
type configKeyError struct {
	File string
	Line int
	Key  string
	Err  error
}

func (e *configKeyError) Error() string {
	return fmt.Sprintf("config %s:%d: %s: %v", e.File, e.Line, e.Key, e.Err)
}

func (e *configKeyError) Unwrap() error { return e.Err }

// notInFile: flags a config file cannot set.
var notInFile = map[string]bool{"config": true, "help": true}

// withConfigFile adds --config to cmd: before cmd runs, the file's keys set
// the flags the command line did not.
func withConfigFile(cmd *cobra.Command) {
	var path string
	cmd.Flags().StringVar(&path, "config", "", "YAML config file: each key is a flag's name (docs/operations.md); flags given on the command line win")
	pre := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if path != "" {
			if err := loadConfigFile(path, cmd.Flags()); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
		}
		if pre != nil {
			return pre(cmd, args)
		}
		return nil
	}
}

// loadConfigFile sets the flags of fs named by the keys of the YAML file at
// path, except those set on the command line.
func loadConfigFile(path string, fs *pflag.FlagSet) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file
	}
	keys := map[string]configValue{}
	if err := flatten(path, doc.Content[0], "", keys); err != nil {
		return err
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		v := keys[name]
		f := fs.Lookup(name)
		if f == nil || notInFile[name] {
			return &configKeyError{File: path, Line: v.line, Key: name, Err: errUnknownKey}
		}
		if f.Changed {
			continue
		}
		if err := f.Value.Set(v.text); err != nil {
			return &configKeyError{File: path, Line: v.line, Key: name, Err: err}
		}
	}
	return nil
}

// configValue is one key's value as the command line would give it.
type configValue struct {
	text string
	line int
}

// flatten collects the keys of the map n into out, sections prefixed.
func flatten(path string, n *yaml.Node, prefix string, out map[string]configValue) error {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("config %s:%d: want a map of flag names to values", path, n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		name := prefix + k.Value
		if v.Kind == yaml.MappingNode {
			if err := flatten(path, v, name+"-", out); err != nil {
				return err
			}
			continue
		}
		text, err := flagText(v)
		if err != nil {
			return &configKeyError{File: path, Line: k.Line, Key: name, Err: err}
		}
		if _, dup := out[name]; dup {
			return &configKeyError{File: path, Line: k.Line, Key: name, Err: errors.New("given twice")}
		}
		out[name] = configValue{text: text, line: k.Line}
	}
	return nil
}

// flagText is a scalar's text (null: empty) or a list's items as one
// comma-separated line (quoted as CSV where an item needs it, which is how
// list flags read their argument).
func flagText(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", nil
		}
		return v.Value, nil
	case yaml.SequenceNode:
		items := make([]string, len(v.Content))
		for i, item := range v.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return "", errors.New("a list item must be a single value")
			}
			items[i] = item.Value
		}
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.Write(items)
		w.Flush()
		return strings.TrimSuffix(b.String(), "\n"), w.Error()
	}
	return "", fmt.Errorf("unsupported YAML value (kind %d)", v.Kind)
}

// resolve follows a YAML alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
