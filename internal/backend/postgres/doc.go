// Package postgres is rekey's PostgreSQL backend: every generation is a new
// login role <base>_g<N>, a member of a group role the user names that owns
// the application's objects and holds its grants; the old login role is
// dropped only on Retire, after the rollout gate. Statements run on the
// primary alone (physical replication carries roles to the replicas), and
// no password is handed out before every replica has replayed the change.
package postgres
