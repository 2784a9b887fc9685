package node

import (
	"crypto/tls"
	"errors"

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
	nt, err := cfg.TLS.Load()
	if err != nil {
		return sec, nil, err
	}
	if sec.PeerTLS == nil {
		sec.PeerTLS = nt.Peer
	}
	if sec.PeerCAs == nil {
		sec.PeerCAs = nt.PeerCAs
	}
	if cfg.AdminTLS == nil {
		cfg.AdminTLS = nt.Server
	}
	return sec, nt.Server, nil
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
// connections present the node certificate (or the peer secret).
func RouterSecurity(cfg *Config) (router.Security, *tls.Config, error) {
	return cfg.security()
}
