// Package keylock provides mutual exclusion by key: a [Map] holds one mutex
// per key, created when first wanted and dropped when nobody holds or waits
// for it, and waiting honours a context.
//
// Guarantees: at most one holder per key within one Map; a waiter whose
// context ends stops waiting and gets the context's error, without ever
// having held the key; the Map keeps no entry for a key nobody holds or
// waits for, so an unbounded set of keys costs memory only while in use.
//
// Non-guarantees: waiters are not served in arrival order; a context that
// ends just as the key comes free may still win it (Lock then returns nil
// and the caller holds the key); nothing is shared between processes or
// between two Map values.
package keylock
