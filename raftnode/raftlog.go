package raftnode

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	dblogger "github.com/lni/dragonboat/v4/logger"
)

// dragonboat logs through its own package-level loggers. They are routed
// into slog (attribute "raftpkg" names the dragonboat package) at error
// level and above by default: dragonboat reports every unreachable peer
// and every snapshot step, which is noise at warn for an operator.

// raftLogTarget is the slog logger dragonboat's messages go to: the latest
// host's logger (dragonboat's loggers are per process, not per host).
var raftLogTarget atomic.Pointer[slog.Logger]

var quietOnce sync.Once

func RouteLogs(log *slog.Logger) {
	raftLogTarget.Store(log)
	quietOnce.Do(func() {
		dblogger.SetLoggerFactory(func(pkg string) dblogger.ILogger {
			l := &raftLogger{pkg: pkg}
			l.level.Store(int32(dblogger.ERROR))
			return l
		})
		for _, p := range []string{"raft", "rsm", "transport", "dragonboat", "logdb", "raftpb", "config", "grpc", "settings", "tan"} {
			dblogger.GetLogger(p).SetLevel(dblogger.ERROR)
		}
		// WARDEN_RAFT_LOG=info|warn|debug (diagnosis, e.g. where an election's
		// time goes): dragonboat's raft and transport packages at that level.
		if lv, ok := map[string]dblogger.LogLevel{"debug": dblogger.DEBUG, "info": dblogger.INFO, "warn": dblogger.WARNING}[os.Getenv("WARDEN_RAFT_LOG")]; ok {
			for _, p := range []string{"raft", "transport", "dragonboat"} {
				dblogger.GetLogger(p).SetLevel(lv)
			}
		}
	})
}

type raftLogger struct {
	pkg   string
	level atomic.Int32
}

func (l *raftLogger) SetLevel(lv dblogger.LogLevel) { l.level.Store(int32(lv)) }

func (l *raftLogger) log(lv dblogger.LogLevel, sl slog.Level, format string, args []any) {
	if int32(lv) > l.level.Load() {
		return
	}
	t := raftLogTarget.Load()
	if t == nil || !t.Enabled(context.Background(), sl) {
		return
	}
	t.Log(context.Background(), sl, fmt.Sprintf(format, args...), "raftpkg", l.pkg)
}

func (l *raftLogger) Debugf(f string, a ...any)   { l.log(dblogger.DEBUG, slog.LevelDebug, f, a) }
func (l *raftLogger) Infof(f string, a ...any)    { l.log(dblogger.INFO, slog.LevelInfo, f, a) }
func (l *raftLogger) Warningf(f string, a ...any) { l.log(dblogger.WARNING, slog.LevelWarn, f, a) }
func (l *raftLogger) Errorf(f string, a ...any)   { l.log(dblogger.ERROR, slog.LevelError, f, a) }
func (l *raftLogger) Panicf(f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	l.log(dblogger.CRITICAL, slog.LevelError, "%s", []any{msg})
	panic(msg)
}
