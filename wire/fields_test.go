package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// fieldTable reads the numbers of fields.go for one message (prefix "req"
// or "resp"): struct field name to number.
func fieldTable(t *testing.T, prefix string) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "fields.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]int{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				field, ok := strings.CutPrefix(name.Name, prefix)
				if !ok || field == "" || field[0] < 'A' || field[0] > 'Z' {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: not a number literal", name.Name)
				}
				n, err := strconv.Atoi(lit.Value)
				if err != nil {
					t.Fatalf("%s: %v", name.Name, err)
				}
				table[field] = n
			}
		}
	}
	return table
}

// docTable reads a message's table from docs/protocol.md: the rows
// "| number | `Name` | ..." of the section that starts with heading.
func docTable(t *testing.T, heading string) map[string]int {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/protocol.md has no heading %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| `(\\w+)` \\|")
	table := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		table[m[2]] = n
	}
	return table
}

func joinKeys(a, b map[string]int) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

// sample sets v (a zero value) to a non-zero value of its type.
func sample(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Int, reflect.Int64:
		v.SetInt(-1)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1)) // one zero element: a non-empty list
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	default:
		t.Fatalf("no sample value for a %s", v.Type())
	}
}

// TestFieldTable: every field of Request and Response has one number in
// fields.go, below 128 and unused by any other field, the protocol page
// lists the same numbers, and every codec writes and reads the field under
// its number: a message holding that field alone is a one-entry map with
// that key from the library encoder, the same bytes from the hand-written
// encoder, and the same value back from the library decoder and the Reader.
// So a field added to the struct, the table or one codec alone fails here.
func TestFieldTable(t *testing.T) {
	for _, msg := range []struct {
		prefix, heading string
		typ             reflect.Type
		encode          func(v any) []byte // hand-written
		read            func(b []byte, v any) bool
		readerSkips     map[string]bool // fields the Reader leaves to the library
	}{
		{"req", "### 3.1 Request (client → server)", reflect.TypeFor[Request](),
			func(v any) []byte { return AppendRequest(nil, v.(*Request)) },
			func(b []byte, v any) bool { rd := NewReader(b, true); return rd.Request(v.(*Request)) && rd.Len() == 0 },
			nil},
		{"resp", "### 3.2 Response (server → client)", reflect.TypeFor[Response](),
			func(v any) []byte { return AppendResponse(nil, v.(*Response)) },
			func(b []byte, v any) bool {
				rd := NewReader(b, true)
				return rd.Response(v.(*Response)) && rd.Len() == 0
			},
			map[string]bool{"Table": true, "Signed": true}},
	} {
		t.Run(msg.typ.Name(), func(t *testing.T) {
			table := fieldTable(t, msg.prefix)
			doc := docTable(t, msg.heading)
			for name := range joinKeys(doc, table) {
				if doc[name] != table[name] {
					t.Errorf("%s: docs/protocol.md %q gives number %d, fields.go %d (0: none)", name, msg.heading, doc[name], table[name])
				}
			}
			byNumber := map[int]string{}
			for name, n := range table {
				if other, dup := byNumber[n]; dup {
					t.Errorf("fields %s and %s share number %d", name, other, n)
				}
				byNumber[n] = name
				if n <= 0 || n >= 128 {
					t.Errorf("field %s: number %d is not one byte (1-127)", name, n)
				}
				if _, ok := msg.typ.FieldByName(name); !ok {
					t.Errorf("fields.go numbers %s%s, which %s does not have", msg.prefix, name, msg.typ.Name())
				}
			}
			for i := 0; i < msg.typ.NumField(); i++ {
				f := msg.typ.Field(i)
				n, ok := table[f.Name]
				if !ok {
					t.Errorf("%s.%s has no number in fields.go", msg.typ.Name(), f.Name)
					continue
				}
				v := reflect.New(msg.typ)
				sample(t, v.Elem().Field(i))
				lib := libraryEncode(t, v.Interface().(msgpack.CustomEncoder))
				if len(lib) < 2 || lib[0] != 0x81 || int(lib[1]) != n {
					t.Errorf("%s: the library writes %x, want a one-entry map with key %d", f.Name, lib, n)
					continue
				}
				if hand := msg.encode(v.Interface()); string(hand) != string(lib) {
					t.Errorf("%s: hand-written encoding %x, library %x", f.Name, hand, lib)
				}
				got := reflect.New(msg.typ)
				if err := decode(lib, got.Interface().(msgpack.CustomDecoder)); err != nil ||
					!reflect.DeepEqual(got.Elem().Interface(), v.Elem().Interface()) {
					t.Errorf("%s: the library decodes %x as %+v (%v)", f.Name, lib, got.Elem().Interface(), err)
				}
				got = reflect.New(msg.typ)
				ok = msg.read(lib, got.Interface())
				if ok == msg.readerSkips[f.Name] {
					t.Errorf("%s: Reader accepted=%v", f.Name, ok)
				} else if ok && !reflect.DeepEqual(got.Elem().Interface(), v.Elem().Interface()) {
					t.Errorf("%s: the Reader decodes %x as %+v", f.Name, lib, got.Elem().Interface())
				}
			}
		})
	}
}
