// Package repocheck holds tests of the repository itself, run by `make
// test`: that every fuzz target of the module is in `make fuzz`.
package repocheck
