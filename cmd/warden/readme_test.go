package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/node/nodetest"
)

// The README's quickstart and CLI sections, and every shell block of the
// guides in docTexts, are run as written: every line of their shell blocks
// is a command run by sh against a real `warden dev` cluster started from
// the built binary, in a directory where ./bin/warden is that binary. A
// block right after the marker `<!-- readme-test: skip -->` is not run (make
// run, make test). A line's trailing comment says what to expect: `# exit
// N` that exit code, `# until Ctrl-C` a command that runs until interrupted
// (it is started, let run, then sent SIGINT, and must end as interrupted);
// any other line must exit 0.

const readmeSkip = "<!-- readme-test: skip -->"

var (
	shBlock     = regexp.MustCompile("(?s)(" + regexp.QuoteMeta(readmeSkip) + "\\s*)?```sh\n(.*?)```")
	expectExit  = regexp.MustCompile(`#\s*exit (\d+)\b`)
	untilCtrlC  = regexp.MustCompile(`#\s*until Ctrl-C`)
	readmeParts = []string{"## Quickstart", "## CLI"}
	// docTexts are run whole, after the README's sections.
	docTexts = []string{"docs/coming-from.md"}
)

// readmeCommand is one line of a README shell block and what it promises.
type readmeCommand struct {
	section, line string
	exit          int  // the exit code it must end with
	untilCtrlC    bool // runs until interrupted
}

// readmeCommands reads the commands of the README's quickstart and CLI
// sections, and how many blocks were skipped.
func readmeCommands(t *testing.T, readme string) ([]readmeCommand, int) {
	t.Helper()
	var cmds []readmeCommand
	skipped := 0
	for _, heading := range readmeParts {
		_, rest, ok := strings.Cut(readme, "\n"+heading+"\n")
		if !ok {
			t.Fatalf("README.md has no %q section", heading)
		}
		if i := strings.Index(rest, "\n## "); i >= 0 {
			rest = rest[:i]
		}
		c, n := shellCommands(heading, rest)
		cmds, skipped = append(cmds, c...), skipped+n
	}
	return cmds, skipped
}

// shellCommands reads the commands of text's shell blocks, named by
// section, and how many blocks were skipped.
func shellCommands(section, text string) ([]readmeCommand, int) {
	var cmds []readmeCommand
	skipped := 0
	for _, m := range shBlock.FindAllStringSubmatch(text, -1) {
		if m[1] != "" {
			skipped++
			continue
		}
		for _, line := range strings.Split(m[2], "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			c := readmeCommand{section: section, line: line}
			if e := expectExit.FindStringSubmatch(line); e != nil {
				c.exit, _ = strconv.Atoi(e[1])
			}
			c.untilCtrlC = untilCtrlC.MatchString(line)
			cmds = append(cmds, c)
		}
	}
	return cmds, skipped
}

// devPorts finds a first client port p such that p..p+2 (clients),
// p+100.. (Raft) and p+200.. (admin) are all free, below the kernel's
// ephemeral ports (nodetest.FreePorts says why).
func devPorts(t *testing.T) int {
	t.Helper()
	lo, hi := nodetest.PortWindow()
	for try := 0; try < 50; try++ {
		base := lo + rand.IntN(max(hi-lo-202, 1))
		free := true
		for _, off := range []int{0, 1, 2, 100, 101, 102, 200, 201, 202} {
			c, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				free = false
				break
			}
			c.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free port range for warden dev")
	return 0
}

func TestDocCommandsRunAsWritten(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds, skipped := readmeCommands(t, string(b))
	if len(cmds) < 10 || skipped == 0 {
		t.Fatalf("found %d commands and %d skipped blocks in README.md: the extraction is broken", len(cmds), skipped)
	}
	for _, doc := range docTexts {
		b, err := os.ReadFile(filepath.Join("../..", doc))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := shellCommands(doc, string(b))
		if len(c) == 0 {
			t.Fatalf("found no commands in %s: the extraction is broken", doc)
		}
		cmds = append(cmds, c...)
	}

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(wardenBin, filepath.Join(dir, "bin", "warden")); err != nil {
		t.Fatal(err)
	}
	port := devPorts(t)
	var eps []string
	for i := 0; i < 3; i++ {
		eps = append(eps, fmt.Sprintf("127.0.0.1:%d", port+i))
	}
	env := append(os.Environ(),
		"WARDEN_ENDPOINTS="+strings.Join(eps, ","),
		fmt.Sprintf("WARDEN_ADMIN=http://127.0.0.1:%d", port+200),
	)

	dev := exec.Command(wardenBin, "dev", "--port", strconv.Itoa(port), "--data-dir", filepath.Join(dir, "data"))
	devLog, _ := os.Create(filepath.Join(dir, "dev.log"))
	dev.Stdout, dev.Stderr = devLog, devLog
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dev.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { dev.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			dev.Process.Kill()
			<-done
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "dev.log"))
			t.Logf("warden dev's log:\n%s", log)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := exec.Command(wardenBin, "status", "-o", "json")
		st.Env = env
		out, _ := st.Output()
		if ready(string(out)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("warden dev not ready: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, c := range cmds {
		if c.untilCtrlC {
			runUntilInterrupted(t, dir, env, c)
			continue
		}
		cmd := exec.Command("sh", "-c", c.line)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
		err := cmd.Run()
		timer.Stop()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %s: %v", c.section, c.line, err)
		}
		t.Logf("$ %s\n%s(exit %d)", c.line, out.String(), code)
		if code != c.exit {
			t.Errorf("%s: %s\nexited %d, the README says %d:\n%s", c.section, c.line, code, c.exit, out.String())
		}
	}
}

// runUntilInterrupted starts a command the README says runs until Ctrl-C,
// lets it run until it prints its first line (or for a few seconds when it
// has nothing to print), interrupts it as a terminal would (SIGINT to its
// process group), and expects it to end as interrupted (exit 130) or
// cleanly.
func runUntilInterrupted(t *testing.T, dir string, env []string, c readmeCommand) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exec "+c.line)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	var out []string
	select {
	case l, ok := <-lines:
		if ok {
			out = append(out, l)
		}
	case <-time.After(3 * time.Second): // nothing to print yet: it is waiting, as it should
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	timer := time.AfterFunc(30*time.Second, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	for l := range lines {
		out = append(out, l)
	}
	err = cmd.Wait()
	timer.Stop()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", c.line, err)
	}
	t.Logf("$ %s   (interrupted)\n%s\n%s(exit %d)", c.line, strings.Join(out, "\n"), errOut.String(), code)
	if code != 130 && code != 0 {
		t.Errorf("%s: %s\nended %d after an interrupt, want 0 (ended by Ctrl-C) or 130 (interrupted mid-wait):\n%s", c.section, c.line, code, errOut.String())
	}
}

// TestReadmeCommandsAreFound checks the extraction on a small README: the
// skip marker, the expectations, and the sections it reads.
func TestReadmeCommandsAreFound(t *testing.T) {
	readme := "# X\n\n## Quickstart\n\n" + readmeSkip + "\n```sh\nmake run\n```\n\n```sh\n./bin/warden status   # nodes\n./bin/warden kv get /x   # exit 4: not found\n./bin/warden watch /x   # until Ctrl-C\n```\n\n## Other\n\n```sh\nnot read\n```\n\n## CLI\n\n```sh\n./bin/warden version\n```\n"
	cmds, skipped := readmeCommands(t, readme)
	if skipped != 1 || len(cmds) != 4 {
		t.Fatalf("got %d commands, %d skipped: %+v", len(cmds), skipped, cmds)
	}
	if cmds[0].exit != 0 || cmds[1].exit != 4 || !cmds[2].untilCtrlC || cmds[3].section != "## CLI" {
		t.Fatalf("expectations read wrong: %+v", cmds)
	}
}
