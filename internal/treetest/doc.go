// Package treetest holds the assertions that adversarial tests of every
// package share: what must never appear in a copy of a host tree.
package treetest
