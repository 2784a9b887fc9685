// Package repocheck holds tests of the repository itself, run by `make
// test`: that every fuzz target of the module is in `make fuzz`; that docs,
// comments, test names, report strings and file names refer to no
// development episode, tracker number or missing file (CheckReferences);
// and that every Go block in README.md and docs/ is quoted from a program
// a test runs.
package repocheck
