package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wardenlock/warden/backup"
	"github.com/wardenlock/warden/control"
)

// RestoreDirName is where `warden restore` puts a verified backup inside a
// node's data dir. A node that finds one on start restores it into its new
// cluster, then renames it to restore.applied-<unix time>.
const RestoreDirName = "restore"

// restorePlan loads the pending restore of a data dir, if any.
func restorePlan(cfg *Config) (*control.RestorePlan, error) {
	dir := filepath.Join(cfg.DataDir, RestoreDirName)
	if _, err := os.Stat(filepath.Join(dir, backup.ManifestFile)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	b, err := backup.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("node: pending restore in %s: %w", dir, err)
	}
	log := cfg.Log
	log.Info("restoring from backup", "dir", dir, "created", b.Manifest.Created, "shards", len(b.Manifest.Shards), "table_gen", b.Manifest.TableGen)
	return b.Plan(func(refused []uint64) {
		if len(refused) > 0 {
			log.Error("restore refused by shards that already held state; the backup stays in place", "shards", refused, "dir", dir)
			return
		}
		to := filepath.Join(cfg.DataDir, RestoreDirName+".applied-"+strconv.FormatInt(time.Now().Unix(), 10))
		if err := os.Rename(dir, to); err != nil {
			log.Warn("restore done, but the backup could not be set aside", "err", err)
		}
	}), nil
}

// PrepareRestore verifies a backup and places it in a data dir that holds
// no cluster yet; the node restores it on its next start. Run it on every
// node of the new cluster.
func PrepareRestore(backupDir, dataDir string, fenceMargin, fenceFloor uint64) (*backup.Manifest, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "raft")); err == nil {
		return nil, fmt.Errorf("node: %s already holds a cluster's data: restore only into an empty data dir", dataDir)
	}
	b, err := backup.Load(backupDir)
	if err != nil {
		return nil, err
	}
	if fenceMargin != 0 {
		b.Manifest.FenceMargin = fenceMargin
	}
	b.Manifest.MinFenceFloor = max(b.Manifest.MinFenceFloor, fenceFloor)
	if err := b.Copy(filepath.Join(dataDir, RestoreDirName)); err != nil {
		return nil, err
	}
	return b.Manifest, nil
}
