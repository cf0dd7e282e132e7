package engine

import (
	"crypto/rand"
	"fmt"
	"math/big"
)

// PasswordAlphabet is letters and digits only: consumers paste passwords
// into URLs, shell lines, my.cnf files and proxies, where any punctuation
// (even a leading '*') has broken someone's setup.
const PasswordAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// PasswordLength gives log2(62^40) ≈ 238 bits of entropy.
const PasswordLength = 40

// NewPassword returns a uniformly random password from crypto/rand.
func NewPassword() (string, error) {
	b := make([]byte, PasswordLength)
	max := big.NewInt(int64(len(PasswordAlphabet)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("generate password: %w", err)
		}
		b[i] = PasswordAlphabet[n.Int64()]
	}
	return string(b), nil
}

// NewPasswords returns a fresh password for each key.
func NewPasswords(keys []string) (Secrets, error) {
	out := Secrets{}
	for _, k := range keys {
		p, err := NewPassword()
		if err != nil {
			return nil, err
		}
		out[k] = p
	}
	return out, nil
}
