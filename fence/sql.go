package fence

import (
	"context"
	"database/sql"
	"fmt"
)

// The guarded update keeps the highest token per lock path in a table of the
// protected database itself, and raises it in the same transaction as the
// write, so "check the token, then write" cannot be split by a stale holder:
// a token below the stored one makes the whole transaction roll back.

// Schema creates the fence table (PostgreSQL).
const Schema = `CREATE TABLE IF NOT EXISTS warden_fence (
	path  TEXT PRIMARY KEY,
	token BIGINT NOT NULL
)`

// Setup creates the fence table if it does not exist.
func Setup(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, Schema)
	return err
}

// raise stores token for path unless a higher one is stored; it returns
// false when the token is stale. The row lock it takes serialises
// concurrent holders of the same path until the transaction ends.
const raise = `INSERT INTO warden_fence (path, token) VALUES ($1, $2)
ON CONFLICT (path) DO UPDATE SET token = EXCLUDED.token
WHERE warden_fence.token <= EXCLUDED.token
RETURNING token`

// Exec runs write inside a transaction that first admits token for path.
// A stale token returns ErrStaleToken and nothing is written.
func Exec(ctx context.Context, db *sql.DB, path string, token uint64, write func(*sql.Tx) error) error {
	if token == 0 || token > 1<<63-1 {
		return fmt.Errorf("%w: token %d cannot be stored", ErrStaleToken, token)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var stored int64
	err = tx.QueryRowContext(ctx, raise, path, int64(token)).Scan(&stored)
	if err == sql.ErrNoRows {
		return fmt.Errorf("%w: a newer holder of %s has written", ErrStaleToken, path)
	}
	if err != nil {
		return err
	}
	if err := write(tx); err != nil {
		return err
	}
	return tx.Commit()
}
