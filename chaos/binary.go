package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildBinary builds ./cmd/warden from the module that contains dir into
// out and returns its path. WARDEN_BIN, when set, is used as is instead.
func BuildBinary(dir, out string) (string, error) {
	if b := os.Getenv("WARDEN_BIN"); b != "" {
		return b, nil
	}
	root, err := moduleRoot(dir)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(out, "warden")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/warden")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: build warden: %v\n%s", err, b)
	}
	return bin, nil
}

func moduleRoot(dir string) (string, error) {
	cmd := exec.Command("go", "env", "GOMOD")
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("chaos: %s is not inside a Go module", dir)
	}
	return filepath.Dir(mod), nil
}
