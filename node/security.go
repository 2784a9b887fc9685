package node

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/router"
)

// security builds the router's security settings and the TLS config of the
// client port (nil = plaintext) from the node config.
func (cfg *Config) security() (router.Security, *tls.Config, error) {
	sec := cfg.Router.Security
	if sec.Policy == nil {
		sec.Policy = cfg.Auth
	}
	if sec.PeerSecret == "" {
		sec.PeerSecret = cfg.PeerSecret
	}
	if sec.PeerSecret == "" {
		sec.PeerSecret = sec.Policy.PeerSecret()
	}
	if cfg.TLS == nil {
		if sec.Policy != nil && sec.PeerSecret == "" {
			return sec, nil, errors.New("node: auth without TLS needs a peer secret (peer-secret in the auth config), " +
				"or nodes could not forward to each other; better, turn TLS on")
		}
		return sec, nil, nil
	}
	live, err := cfg.TLS.Live()
	if err != nil {
		return sec, nil, err
	}
	cfg.liveTLS = live // reloadable (Node.Reload)
	if sec.PeerTLS == nil && sec.PeerCAs == nil {
		sec.LiveTLS = live
	}
	server := live.ServerConfig()
	if cfg.AdminTLS == nil {
		cfg.AdminTLS = server
	}
	return sec, server, nil
}

// Reload reads the TLS files again and, when pol is not nil, puts it in
// place of the auth policy (`warden serve` does both on SIGHUP). New
// connections on the client and admin ports and new forwarding connections
// use the new certificates; established ones keep theirs. Raft dials read
// the files at each new connection (dragonboat); Raft's listener keeps the
// certificate it started with. Every request is checked against the new
// policy, and a connection whose token was removed is closed at its next
// request (router.Server.SetPolicy). The two are independent: files that do
// not load keep the old certificates, and the policy is still replaced (and
// the other way round); the errors are returned.
func (n *Node) Reload(pol *auth.Policy) error {
	var errs []error
	if live := n.cfg.liveTLS; live != nil {
		if err := live.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("TLS files not reloaded, the old certificates stay in use: %w", err))
		}
	}
	if pol != nil {
		if err := n.Router.SetPolicy(pol); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func tlsFile(f *auth.TLSFiles, which string) string {
	if f == nil {
		return ""
	}
	switch which {
	case "ca":
		return f.CA
	case "cert":
		return f.Cert
	}
	return f.Key
}

// RouterSecurity gives a standalone router (`warden router`) the same
// security a node's router gets from cfg: the router settings and the TLS
// config of its client listener (nil = plaintext). Its forwarding
// connections present the node certificate (or the peer secret). The TLS
// material is reloadable: Security.LiveTLS.Reload.
func RouterSecurity(cfg *Config) (router.Security, *tls.Config, error) {
	return cfg.security()
}
