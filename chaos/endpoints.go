package chaos

import (
	"context"
	"fmt"
	"sync"

	"github.com/wardenlock/warden/client"
)

// ClientLinks puts a proxy between one client and every node, so the
// client alone can be cut off (or slowed down).
type ClientLinks struct {
	Name    string
	Links   []*Link
	proxies []*Proxy
}

// Endpoints are the addresses the client should dial.
func (cl *ClientLinks) Endpoints() []string {
	var out []string
	for _, p := range cl.proxies {
		out = append(out, p.Addr())
	}
	return out
}

// SetAll sets every link of this client.
func (cl *ClientLinks) SetAll(m Mode) {
	for _, l := range cl.Links {
		l.Set(m, 0)
	}
}

// Close stops the proxies.
func (cl *ClientLinks) Close() {
	for _, p := range cl.proxies {
		p.Close()
	}
}

var clientLinksMu sync.Mutex

// NewClientLinks makes a client's proxies, starting with node `first` so
// clients spread over the nodes.
func (c *Cluster) NewClientLinks(name string, first int) (*ClientLinks, error) {
	clientLinksMu.Lock()
	defer clientLinksMu.Unlock()
	cl := &ClientLinks{Name: name}
	for k := range c.Nodes {
		i := (first + k) % len(c.Nodes)
		l := NewLink(fmt.Sprintf("%s→node %d", name, i+1), int64(k))
		p, err := NewProxy(c.Nodes[i].ClientAddr, FixedLink(l))
		if err != nil {
			cl.Close()
			return nil, err
		}
		cl.Links = append(cl.Links, l)
		cl.proxies = append(cl.proxies, p)
	}
	return cl, nil
}

// LinkedClient connects a client through links of its own (NewClientLinks);
// closing it closes the client, then its proxies.
func (c *Cluster) LinkedClient(ctx context.Context, name string, first int, opts ...client.Option) (*client.Client, func(), error) {
	links, err := c.NewClientLinks(name, first)
	if err != nil {
		return nil, nil, err
	}
	cl, err := client.New(ctx, links.Endpoints(), opts...)
	if err != nil {
		links.Close()
		return nil, nil, err
	}
	return cl, func() { cl.Close(); links.Close() }, nil
}
