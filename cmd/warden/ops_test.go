package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wardenlock/warden/admin"
	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/node"
)

// yamlDocs parses every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// dig follows keys (string: a map key, int: a list index) into v.
func dig(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("want a map holding %q, have %T", k, v)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("want a list with item %d, have %v", k, v)
			}
			v = l[k]
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// serveConfig runs `warden serve` with args up to the node config it would
// start.
func serveConfig(t *testing.T, args []string) node.Config {
	t.Helper()
	cfg, err := tryServeConfig(args)
	if err != nil {
		t.Fatalf("warden serve %s: %v", strings.Join(args, " "), err)
	}
	return cfg
}

func tryServeConfig(args []string) (node.Config, error) {
	var got node.Config
	cmd := newServeCmd(func(cfg node.Config, _ serveFlags, _ *serveSecurity) error { got = cfg; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return got, cmd.Execute()
}

// TestServeAdminFlags: the admin port's flags and config keys reach the
// node config; bad values are refused.
func TestServeAdminFlags(t *testing.T) {
	cfg := serveConfig(t, []string{"--plaintext", "--admin", "127.0.0.1:0", "--admin-max-conns-per-addr", "8",
		"--admin-max-conns", "-1", "--admin-header-timeout", "2s", "--admin-idle-timeout", "90s", "--advertise", "node-1.example:7070"})
	want := admin.Limits{MaxConnsPerAddr: 8, MaxConns: -1, HeaderTimeout: 2 * time.Second, IdleTimeout: 90 * time.Second}
	if cfg.AdminLimits != want || cfg.AdminPlaintextAnywhere || cfg.ClientAdvertise != "node-1.example:7070" {
		t.Errorf("limits %+v, plaintext anywhere %v, advertise %q", cfg.AdminLimits, cfg.AdminPlaintextAnywhere, cfg.ClientAdvertise)
	}
	file := filepath.Join(t.TempDir(), "warden.yaml")
	os.WriteFile(file, []byte("admin: 10.0.0.1:7270\ninsecure-plaintext-admin: true\nadmin-max-conns: 7\nadmin-header-timeout: 3s\n"), 0o644)
	cfg = serveConfig(t, []string{"--plaintext", "--config", file})
	if !cfg.AdminPlaintextAnywhere || cfg.AdminLimits.MaxConns != 7 || cfg.AdminLimits.HeaderTimeout != 3*time.Second ||
		cfg.AdminLimits.MaxConnsPerAddr != admin.DefaultLimits.MaxConnsPerAddr {
		t.Errorf("from the config file: plaintext anywhere %v, limits %+v", cfg.AdminPlaintextAnywhere, cfg.AdminLimits)
	}
	for _, bad := range [][]string{
		{"--admin-header-timeout", "0s"},
		{"--admin-idle-timeout", "soon"},
		{"--advertise", "no-port"},
	} {
		if _, err := tryServeConfig(append([]string{"--plaintext"}, bad...)); err == nil {
			t.Errorf("warden serve %v: no error", bad)
		}
	}
}

// TestKubernetesManifest: ops/k8s/warden.yaml parses; its nodes' arguments
// are accepted by `warden serve` and give TLS on every port, auth on with
// the manifest's policy, an admin port that passes the exposure check, and
// advertised names the node certificate of its `warden certs` line covers;
// the probes ask for /livez and /readyz over HTTPS (which answer anyone);
// the NetworkPolicy admits the admin port from the monitoring namespace
// and nowhere else, and the client port from the namespace's pods.
func TestKubernetesManifest(t *testing.T) {
	const file = "../../ops/k8s/warden.yaml"
	docs := yamlDocs(t, file)
	byKind := map[string][]map[string]any{}
	for _, d := range docs {
		byKind[d["kind"].(string)] = append(byKind[d["kind"].(string)], d)
	}
	for _, k := range []string{"ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget", "NetworkPolicy"} {
		if len(byKind[k]) == 0 {
			t.Fatalf("no %s in %s", k, file)
		}
	}
	configMaps := map[string]map[string]any{}
	for _, cm := range byKind["ConfigMap"] {
		configMaps[dig(t, cm, "metadata", "name").(string)] = cm["data"].(map[string]any)
	}
	sts := byKind["StatefulSet"][0]
	pod := dig(t, sts, "spec", "template", "spec")
	container := dig(t, pod, "containers", 0)

	// The files the pod mounts, laid out in a temp dir.
	dir := t.TempDir()
	mounts := map[string]string{} // mount path -> local dir
	volumes := map[string]map[string]any{}
	for _, v := range dig(t, pod, "volumes").([]any) {
		volumes[v.(map[string]any)["name"].(string)] = v.(map[string]any)
	}
	hosts := certHosts(t, file)
	for _, m := range dig(t, container, "volumeMounts").([]any) {
		m := m.(map[string]any)
		name, path := m["name"].(string), m["mountPath"].(string)
		local := filepath.Join(dir, name)
		mounts[path] = local
		switch v := volumes[name]; {
		case name == "data":
		case v["configMap"] != nil:
			data := configMaps[dig(t, v, "configMap", "name").(string)]
			if data == nil {
				t.Fatalf("volume %s names a ConfigMap the manifest does not have", name)
			}
			os.MkdirAll(local, 0o755)
			for f, content := range data {
				os.WriteFile(filepath.Join(local, f), []byte(content.(string)), 0o644)
			}
		case v["secret"] != nil:
			if got := dig(t, v, "secret", "secretName"); got != "warden-tls" {
				t.Fatalf("secret volume %s is %v, want warden-tls (the manifest's header makes it)", name, got)
			}
			if err := (auth.DevCerts{Dir: local, Hosts: hosts, Clients: []string{"admin", "prometheus"}}).Generate(); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := map[string]string{"POD_NAME": "warden-1", "POD_NAMESPACE": "warden", "POD_IP": "10.4.0.17"}
	var args []string
	for _, a := range strs(dig(t, container, "args"))[1:] { // after "serve"
		a = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(a, func(v string) string { return env[v[2:len(v)-1]] })
		for path, local := range mounts {
			a = strings.Replace(a, "="+path+"/", "="+local+"/", 1)
			if strings.HasSuffix(a, "="+path) {
				a = strings.TrimSuffix(a, path) + local
			}
		}
		args = append(args, a)
	}
	cfg := serveConfig(t, args)
	if cfg.ID != 2 {
		t.Errorf("pod warden-1 is node %d, want 2 (its ConfigMap file)", cfg.ID)
	}
	if cfg.TLS == nil || cfg.Auth == nil {
		t.Fatalf("TLS %v, auth %v: want both on", cfg.TLS, cfg.Auth)
	}
	if _, err := cfg.TLS.Load(); err != nil {
		t.Fatal(err)
	}
	if err := admin.CheckExposure(cfg.AdminAddr, true, cfg.AdminPlaintextAnywhere); err != nil {
		t.Error(err)
	}
	if err := admin.CheckExposure(cfg.AdminAddr, false, false); err == nil {
		t.Errorf("admin address %s passes as loopback: the manifest does not test the exposure rule", cfg.AdminAddr)
	}
	for _, c := range []struct {
		identity string
		perm     auth.Perm
		want     bool
	}{{"admin", auth.Admin, true}, {"prometheus", auth.Read, true}, {"prometheus", auth.Admin, false}} {
		if got := cfg.Auth.Allowed(c.identity, c.perm, "/"); got != c.want {
			t.Errorf("policy: %s has %v on /: %v, want %v", c.identity, c.perm, got, c.want)
		}
	}
	// Peers and clients dial the advertised names: the certificate covers them.
	leaf := nodeCert(t, cfg.TLS.Cert)
	for _, addr := range []string{cfg.ClientAdvertise, cfg.RaftAddr, "warden.warden.svc:7070"} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("address %q: %v", addr, err)
		}
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("the node certificate of the manifest's `warden certs` line does not cover %s: %v", host, err)
		}
	}

	for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
		get := dig(t, container, probe, "httpGet")
		path := dig(t, get, "path").(string)
		if dig(t, get, "port") != "admin" || dig(t, get, "scheme") != "HTTPS" || (path != "/livez" && path != "/readyz") {
			t.Errorf("%s: %v, want HTTPS GET /livez or /readyz on the admin port", probe, get)
		}
	}
	for _, svc := range byKind["Service"] {
		for _, p := range dig(t, svc, "spec", "ports").([]any) {
			if p.(map[string]any)["name"] == "admin" {
				t.Errorf("Service %v publishes the admin port", dig(t, svc, "metadata", "name"))
			}
		}
	}

	np := byKind["NetworkPolicy"][0]
	if got := dig(t, np, "spec", "podSelector", "matchLabels", "app.kubernetes.io/name"); got != "warden" {
		t.Fatalf("NetworkPolicy selects %v", got)
	}
	if types := strs(dig(t, np, "spec", "policyTypes")); len(types) != 1 || types[0] != "Ingress" {
		t.Fatalf("NetworkPolicy types %v", types)
	}
	admitted := map[string][]string{} // port -> who: "namespaces:<selector>", "pods:<selector>"
	for _, rule := range dig(t, np, "spec", "ingress").([]any) {
		var from []string
		for _, f := range dig(t, rule, "from").([]any) {
			f := f.(map[string]any)
			switch {
			case f["namespaceSelector"] != nil && f["podSelector"] == nil:
				from = append(from, "namespaces:"+selector(f["namespaceSelector"]))
			case f["podSelector"] != nil && f["namespaceSelector"] == nil:
				from = append(from, "pods:"+selector(f["podSelector"]))
			default:
				from = append(from, "other")
			}
		}
		for _, p := range dig(t, rule, "ports").([]any) {
			port := p.(map[string]any)["port"].(string)
			admitted[port] = append(admitted[port], from...)
		}
	}
	if got := admitted["admin"]; len(got) != 1 || got[0] != "namespaces:kubernetes.io/metadata.name=monitoring" {
		t.Errorf("the admin port is admitted from %q, want the monitoring namespace only", got)
	}
	if !contains(admitted["client"], "pods:") || !contains(admitted["raft"], "pods:app.kubernetes.io/name=warden") {
		t.Errorf("client port admitted from %q, Raft from %q", admitted["client"], admitted["raft"])
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// selector renders a label selector as "k=v,..." ("" selects everything);
// anything but matchLabels renders as "?".
func selector(v any) string {
	m, _ := v.(map[string]any)
	var out []string
	for k, x := range m {
		if k != "matchLabels" {
			return "?"
		}
		for lk, lv := range x.(map[string]any) {
			out = append(out, lk+"="+lv.(string))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// certHosts reads the --hosts of the `warden certs` line in the manifest's
// header, the line a reader runs.
func certHosts(t *testing.T, file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--hosts '([^']+)'`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no `warden certs ... --hosts '...'` line", file)
	}
	return splitList(string(m[1]))
}

func nodeCert(t *testing.T, path string) *x509.Certificate {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestComposeFile: the compose file's nodes start as `warden serve` reads
// their commands, and their admin ports pass the exposure check node.Start
// makes (plaintext on the compose network needs the explicit opt-out).
func TestComposeFile(t *testing.T) {
	doc := yamlDocs(t, "../../ops/compose/docker-compose.yml")[0]
	nodes := 0
	for name, svc := range dig(t, doc, "services").(map[string]any) {
		args := strs(dig(t, svc, "command"))
		if args[0] != "serve" {
			continue
		}
		nodes++
		cfg := serveConfig(t, args[1:])
		if cfg.AdminAddr == "" {
			t.Errorf("%s: no admin port", name)
		}
		if err := admin.CheckExposure(cfg.AdminAddr, cfg.TLS != nil, cfg.AdminPlaintextAnywhere); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if nodes != 3 {
		t.Fatalf("%d nodes in the compose file, want 3", nodes)
	}
}

// TestPrometheusScrapeConfig: every HTTPS job presents a client
// certificate (the admin port answers /metrics to an identity with read
// on / only), and the relabelling keeps the pods' admin port.
func TestPrometheusScrapeConfig(t *testing.T) {
	doc := yamlDocs(t, "../../ops/prometheus/scrape.yaml")[0]
	jobs := dig(t, doc, "scrape_configs").([]any)
	https := 0
	for _, j := range jobs {
		j := j.(map[string]any)
		if j["scheme"] != "https" {
			continue
		}
		https++
		for _, k := range []string{"ca_file", "cert_file", "key_file"} {
			if v, _ := dig(t, j, "tls_config", k).(string); v == "" {
				t.Errorf("job %v: no tls_config.%s", j["job_name"], k)
			}
		}
	}
	if https == 0 {
		t.Fatal("no HTTPS job")
	}
}
