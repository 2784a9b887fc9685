package fence

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// These tests need a real PostgreSQL server: `make test-pg` (part of
// `make test`) starts one and sets WARDEN_TEST_PG_DSN.
func openPG(t *testing.T) *sql.DB {
	dsn := os.Getenv("WARDEN_TEST_PG_DSN")
	if dsn == "" {
		t.Skip("WARDEN_TEST_PG_DSN is not set: run `make test-pg` to test against a real PostgreSQL")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Setup(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS inventory (sku TEXT PRIMARY KEY, reserved INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func reserve(ctx context.Context, db *sql.DB, path string, token uint64, sku string) error {
	return Exec(ctx, db, path, token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO inventory (sku, reserved) VALUES ($1, 1)
			ON CONFLICT (sku) DO UPDATE SET reserved = inventory.reserved + 1`, sku)
		return err
	})
}

func TestSQLGuardRefusesStaleHolder(t *testing.T) {
	db := openPG(t)
	ctx := context.Background()
	path := "/locks/inventory/sku-" + time.Now().Format("150405.000000")
	if err := reserve(ctx, db, path, 10, path); err != nil {
		t.Fatal(err)
	}
	if err := reserve(ctx, db, path, 12, path); err != nil {
		t.Fatal(err)
	}
	// The holder with token 10 was paused, lost its lock, and wakes up.
	if err := reserve(ctx, db, path, 10, path); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("stale holder: got %v, want ErrStaleToken", err)
	}
	var reserved int
	if err := db.QueryRowContext(ctx, `SELECT reserved FROM inventory WHERE sku = $1`, path).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if reserved != 2 {
		t.Fatalf("reserved = %d, want 2: the stale write must not land", reserved)
	}
}

// Concurrent holders with interleaved tokens: every write that commits has a
// token at least as high as every write committed before it.
func TestSQLGuardSerialisesConcurrentHolders(t *testing.T) {
	db := openPG(t)
	ctx := context.Background()
	path := "/locks/inventory/race-" + time.Now().Format("150405.000000")
	var mu sync.Mutex
	var committed []uint64
	var wg sync.WaitGroup
	for tok := uint64(1); tok <= 8; tok++ {
		wg.Add(1)
		go func(tok uint64) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				err := Exec(ctx, db, path, tok, func(tx *sql.Tx) error {
					mu.Lock()
					committed = append(committed, tok)
					mu.Unlock()
					return nil
				})
				if err != nil && !errors.Is(err, ErrStaleToken) {
					t.Error(err)
				}
			}
		}(tok)
	}
	wg.Wait()
	var stored int64
	if err := db.QueryRowContext(ctx, `SELECT token FROM warden_fence WHERE path = $1`, path).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 8 {
		t.Fatalf("stored token %d, want the highest (8)", stored)
	}
	if len(committed) == 0 {
		t.Fatal("nothing committed")
	}
	// Writes run under the fence row's lock, in commit order: a lower token
	// never writes after a higher one.
	for i := 1; i < len(committed); i++ {
		if committed[i] < committed[i-1] {
			t.Fatalf("token %d wrote after token %d", committed[i], committed[i-1])
		}
	}
}
