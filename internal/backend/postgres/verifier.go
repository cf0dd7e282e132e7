package postgres

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// scramIterations is PostgreSQL's default (scram_iterations, 4096 through
// 16): a login costs the server what any other role's does.
const scramIterations = 4096

// verifier is what the server stores for password under encryption (the
// server's password_encryption), computed here so that the password itself
// never travels in a statement the server may log (log_statement,
// pg_stat_statements, an error report). salt is used for SCRAM only.
func verifier(encryption, user, password string, salt []byte) (string, error) {
	if !saslPrepIdentity(password) {
		// SASLprep would change it: the client's and the server's keys
		// could then differ. rekey's passwords are letters and digits.
		return "", fmt.Errorf("the password of %s holds characters other than printable ASCII, which rekey cannot hash as PostgreSQL's clients do", user)
	}
	switch encryption {
	case "scram-sha-256":
		return scramVerifier(password, salt, scramIterations)
	case "md5":
		sum := md5.Sum([]byte(password + user))
		return "md5" + hex.EncodeToString(sum[:]), nil
	}
	return "", fmt.Errorf("the server's password_encryption is %q, which rekey does not know: set it to scram-sha-256", encryption)
}

// scramVerifier is SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
// (RFC 5802, 7677), the form CREATE ROLE ... PASSWORD stores as it is.
func scramVerifier(password string, salt []byte, iterations int) (string, error) {
	if len(salt) == 0 {
		salt = make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return "", err
		}
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	serverKey := hmacSHA256(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(serverKey)), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// saslPrepIdentity: printable ASCII, which SASLprep leaves as it is.
func saslPrepIdentity(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}
