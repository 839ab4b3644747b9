// Package treegen writes the deterministic skill trees that benchmarks and
// comparison scripts measure: the "20 x 100" tree of the issues.
package treegen
