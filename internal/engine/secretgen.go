package engine

import (
	"crypto/rand"
	"fmt"
	"math"
	"math/big"
)

// PasswordAlphabet is letters and digits only: consumers paste passwords
// into URLs, shell lines, my.cnf files and proxies, where any punctuation
// (even a leading '*') has broken someone's setup.
const PasswordAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// Password lengths, in characters of PasswordAlphabet. The floor is the
// strength every generated password keeps whatever a spec asks; the
// default is the floor, because it is also the most MySQL accepts for a
// replication source password: one length fits every consumer known.
// The ceiling keeps a password a sane size for an environment variable or
// a URL, far below what any backend accepts.
const (
	MinPasswordLength     = 32 // log2(62^32) ≈ 190.5 bits
	DefaultPasswordLength = MinPasswordLength
	MaxPasswordLength     = 128
)

// MinPasswordBits is the floor in bits, as said to users.
const MinPasswordBits = 190

// PasswordBits is the entropy of a generated password of n characters.
func PasswordBits(n int) float64 { return float64(n) * math.Log2(float64(len(PasswordAlphabet))) }

// NewPassword returns a uniformly random password of the default length
// from crypto/rand.
func NewPassword() (string, error) { return NewPasswordOfLength(DefaultPasswordLength) }

// NewPasswordOfLength returns a uniformly random password of n characters
// from crypto/rand; n outside [MinPasswordLength, MaxPasswordLength] is an
// error, never a weaker password.
func NewPasswordOfLength(n int) (string, error) {
	if n < MinPasswordLength || n > MaxPasswordLength {
		return "", fmt.Errorf("generate password: length %d is outside %d-%d", n, MinPasswordLength, MaxPasswordLength)
	}
	b := make([]byte, n)
	max := big.NewInt(int64(len(PasswordAlphabet)))
	for i := range b {
		r, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("generate password: %w", err)
		}
		b[i] = PasswordAlphabet[r.Int64()]
	}
	return string(b), nil
}

// NewPasswords returns a fresh password for each key, of the length given
// for it.
func NewPasswords(lengths map[string]int) (Secrets, error) {
	out := Secrets{}
	for k, n := range lengths {
		p, err := NewPasswordOfLength(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = p
	}
	return out, nil
}
