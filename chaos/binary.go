package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildBinary builds ./cmd/warden with the build tag `bugs` (the test bug
// switches and the clock offset file the suite drives; a production build
// has neither) from the module that contains dir into out and returns its
// path. WARDEN_BIN, when set, is used instead; it must be such a build.
func BuildBinary(dir, out string) (string, error) {
	if b := os.Getenv("WARDEN_BIN"); b != "" {
		return b, checkTestBuild(b)
	}
	root, err := moduleRoot(dir)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(out, "warden")
	cmd := exec.Command("go", "build", "-tags", TestTag, "-o", bin, "./cmd/warden")
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

// TestTag is the build tag of a warden binary the suite can drive.
const TestTag = "bugs"

// checkTestBuild refuses a binary not built with TestTag: its nodes would
// ignore the clock skews and bug switches the suite sets, and the runs
// would prove nothing.
func checkTestBuild(bin string) error {
	b, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return fmt.Errorf("chaos: read the build settings of %s: %v", bin, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "-tags=") {
			for _, tag := range strings.Split(strings.TrimPrefix(f[1], "-tags="), ",") {
				if tag == TestTag {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("chaos: %s was not built with -tags %s (WARDEN_BIN must be: go build -tags %s ./cmd/warden)", bin, TestTag, TestTag)
}
