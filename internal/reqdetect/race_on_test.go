//go:build race

package reqdetect

// raceOn: the race detector is on, and the large inputs are smaller.
const raceOn = true
