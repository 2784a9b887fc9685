package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// The signing key signs fencing tokens for resources that verify them
// offline (package fence). Every node of a cluster loads the same private
// key; resources get the public one.

func signingKeyCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "signing-key",
		Short: "Create the cluster's Ed25519 key for signed fencing tokens",
		Long: `signing-key writes signing.key (private, for every node: warden serve
--signing-key) and signing.pub (public, for protected resources) into --dir.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			der, err := x509.MarshalPKCS8PrivateKey(priv)
			if err != nil {
				return err
			}
			if err := writePEM(filepath.Join(dir, "signing.key"), "PRIVATE KEY", der, 0o600); err != nil {
				return err
			}
			pder, err := x509.MarshalPKIXPublicKey(pub)
			if err != nil {
				return err
			}
			if err := writePEM(filepath.Join(dir, "signing.pub"), "PUBLIC KEY", pder, 0o644); err != nil {
				return err
			}
			fmt.Printf("wrote %s and %s\n", filepath.Join(dir, "signing.key"), filepath.Join(dir, "signing.pub"))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "output directory")
	return cmd
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode)
}

// loadSigningKey reads a PKCS#8 PEM Ed25519 private key.
func loadSigningKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New(path + ": not an Ed25519 key")
	}
	return key, nil
}
