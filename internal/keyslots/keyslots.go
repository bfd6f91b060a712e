// Package keyslots holds the most running slots one key can have. Package execlock names a lock
// per slot and package limits bounds per-key limits by the same number; kept here, in a package that
// imports nothing, it spares limits (and admin and dashboard through it) importing execlock and with
// it the Redis clients. It is internal because users have it already as execlock.MaxLimit and
// limits.MaxKeyLimit.
package keyslots

// Max is the largest running limit (number of slots) of one key.
const Max = 1024
