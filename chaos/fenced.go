package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
)

// Oracle is the fenced resource of the lock-set workload: a store of lists
// that accepts an access (read or write) only with a token at least as high
// as the highest it has seen for that path, as a real resource protected by
// Warden's fencing tokens would. It serves HTTP on 127.0.0.1 so client
// processes (which the suite pauses) can use it too.
type Oracle struct {
	mu      sync.Mutex
	max     map[string]uint64
	lists   map[string][]string
	refused int
	srv     *http.Server
	ln      net.Listener
}

// NewOracle starts the oracle.
func NewOracle() (*Oracle, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &Oracle{max: map[string]uint64{}, lists: map[string][]string{}, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("/read", o.read)
	mux.HandleFunc("/write", o.write)
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go o.srv.Serve(ln)
	return o, nil
}

// URL is the oracle's base address.
func (o *Oracle) URL() string { return "http://" + o.ln.Addr().String() }

// Close stops the server.
func (o *Oracle) Close() { o.srv.Close() }

// admit checks and raises the fence of path.
func (o *Oracle) admit(path string, token uint64) bool {
	if token < o.max[path] {
		o.refused++
		return false
	}
	o.max[path] = token
	return true
}

func (o *Oracle) read(w http.ResponseWriter, r *http.Request) {
	path, token := r.URL.Query().Get("path"), parseU(r.URL.Query().Get("token"))
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.admit(path, token) {
		http.Error(w, "stale token", http.StatusConflict)
		return
	}
	json.NewEncoder(w).Encode(o.lists[path])
}

func (o *Oracle) write(w http.ResponseWriter, r *http.Request) {
	path, token := r.URL.Query().Get("path"), parseU(r.URL.Query().Get("token"))
	var list []string
	if err := json.NewDecoder(r.Body).Decode(&list); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.admit(path, token) {
		http.Error(w, "stale token", http.StatusConflict)
		return
	}
	o.lists[path] = list
}

// Refused is the number of stale accesses the fence turned away.
func (o *Oracle) Refused() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused
}

// List returns the final list of path.
func (o *Oracle) List(path string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lists[path]...)
}

func parseU(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }

// FencedClient is one lock-set client: lock, read the list through the
// fence, hold a little, write the list plus one new element, unlock.
type FencedClient struct {
	Name      string
	Endpoints []string
	Oracle    string
	Path      string
	TTL       time.Duration
	Hold      time.Duration
	// OnAck is told each element the resource accepted.
	OnAck func(elem string)
	// OnReject is told when an access was refused although the session
	// was still live 300 ms later (only meaningful for clients that are
	// never paused).
	OnReject func(what string)
}

// Run loops until ctx ends.
func (f *FencedClient) Run(ctx context.Context) error {
	cl, err := client.New(ctx, f.Endpoints, client.WithRequestTimeout(time.Second), client.WithPoolSize(1),
		client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	hc := &http.Client{Timeout: 2 * time.Second}
	n := 0
	for ctx.Err() == nil {
		s, err := cl.NewSession(ctx, client.WithTTL(f.TTL))
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		for ctx.Err() == nil && s.Err() == nil {
			n++
			f.once(ctx, s, hc, fmt.Sprintf("%s-%d", f.Name, n))
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.Close(cctx)
		cancel()
	}
	return nil
}

func (f *FencedClient) once(ctx context.Context, s *client.Session, hc *http.Client, elem string) {
	m := client.NewMutex(s, f.Path)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := m.Lock(lctx)
	cancel()
	if err != nil {
		return
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m.Unlock(uctx)
		cancel()
	}()
	token := m.Token()
	q := "?path=" + url.QueryEscape(f.Path) + "&token=" + strconv.FormatUint(token, 10)
	resp, err := hc.Get(f.Oracle + "/read" + q)
	if err != nil {
		return
	}
	var list []string
	ok := resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&list) == nil
	resp.Body.Close()
	if !ok {
		f.rejected(s, m, "read", token)
		return
	}
	sleepCtx(ctx, f.Hold)
	body, _ := json.Marshal(append(list, elem))
	resp, err = hc.Post(f.Oracle+"/write"+q, "application/json", strings.NewReader(string(body)))
	if err != nil {
		return // unknown: the element may or may not be in
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if f.OnAck != nil {
			f.OnAck(elem)
		}
		return
	}
	f.rejected(s, m, "write", token)
}

// rejected: someone used a higher token, so the service granted the lock
// to another holder. Our session's own clock runs out before the service's,
// so if it is still live a moment later, the service broke the lease.
func (f *FencedClient) rejected(s *client.Session, m *client.Mutex, what string, token uint64) {
	time.Sleep(300 * time.Millisecond)
	if f.OnReject != nil && s.Err() == nil && m.IsHeld() {
		f.OnReject(fmt.Sprintf("%s: %s with token %d on %s refused (a newer token was used) while its session was live and it held the lock",
			f.Name, what, token, f.Path))
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
