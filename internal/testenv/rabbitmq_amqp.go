package testenv

// The checks a test makes as a client of the broker: AMQP addresses and logins.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// AMQPAddr is host:port of the AMQP listener.
func (m *RabbitMQ) AMQPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.AMQPPort)) }

// AMQPSAddr is host:port of the AMQP over TLS listener.
func (m *RabbitMQ) AMQPSAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.AMQPSPort))
}

// CanAuthenticate logs in over AMQP 0-9-1 and reports whether the broker
// accepted the password. It needs no tag or permission, so it checks the
// credentials alone, as any client of the broker would.
func (m *RabbitMQ) CanAuthenticate(user, password string) error {
	return m.amqpLogin(false, user, password, "")
}

// CanAuthenticateTLS is CanAuthenticate over AMQPS, verifying the
// broker's certificate against the node's CA.
func (m *RabbitMQ) CanAuthenticateTLS(user, password string) error {
	return m.amqpLogin(true, user, password, "")
}

// CanOpenVhost logs in and opens vhost, which also needs the user's
// permissions there.
func (m *RabbitMQ) CanOpenVhost(user, password, vhost string) error {
	return m.amqpLogin(false, user, password, vhost)
}

// amqpLogin speaks just enough AMQP 0-9-1 to be told yes or no; a client
// library would be a dependency for a dozen frames.
func (m *RabbitMQ) amqpLogin(useTLS bool, user, password, vhost string) error {
	c, err := m.dialAMQP(useTLS)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	a := &amqpConn{w: c, r: bufio.NewReader(c)}
	_, a.err = c.Write([]byte("AMQP\x00\x00\x09\x01"))
	a.expect(10) // connection.start
	// authentication_failure_close: the broker says why it refuses instead
	// of dropping the connection.
	caps := amqpLongstr(append(amqpShortstr(nil, "capabilities"), 'F'),
		string(append(amqpShortstr(nil, "authentication_failure_close"), 't', 1)))
	p := amqpLongstr(amqpMethod(10, 11), string(caps)) // connection.start-ok
	p = amqpShortstr(p, "PLAIN")
	p = amqpLongstr(p, "\x00"+user+"\x00"+password)
	a.send(amqpShortstr(p, "en_US"))
	tune := a.expect(30) // connection.tune: the password was accepted
	if a.err == nil && len(tune) < 12 {
		a.err = errors.New("short connection.tune")
	}
	// RabbitMQ refuses connection.close before connection.open, so a check
	// of the password alone hangs up here; the broker logs a warning.
	if a.err == nil && vhost != "" {
		a.send(append(append(amqpMethod(10, 31), tune[4:10]...), 0, 0)) // tune-ok, no heartbeats
		a.send(append(amqpShortstr(amqpShortstr(amqpMethod(10, 40), vhost), ""), 0))
		a.expect(41) // connection.open-ok
		a.send(append(amqpShortstr(binary.BigEndian.AppendUint16(amqpMethod(10, 50), 200), ""), 0, 0, 0, 0))
		a.expect(51) // connection.close-ok
	}
	if a.err != nil {
		return fmt.Errorf("amqp login as %q: %w", user, a.err)
	}
	return nil
}

// amqpConn keeps the first error so that a handshake reads as a script.
type amqpConn struct {
	w   io.Writer
	r   *bufio.Reader
	err error
}

func (a *amqpConn) send(payload []byte) {
	if a.err == nil {
		f := binary.BigEndian.AppendUint32([]byte{1, 0, 0}, uint32(len(payload)))
		_, a.err = a.w.Write(append(append(f, payload...), 0xCE))
	}
}

// expect returns the next connection method on channel 0, which must be
// method id; connection.close becomes the error.
func (a *amqpConn) expect(id uint16) []byte {
	for a.err == nil {
		typ, p := a.frame()
		if a.err != nil || typ != 1 || len(p) < 4 {
			continue // heartbeats and the like
		}
		class, method := binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:])
		switch {
		case class == 10 && method == id:
			return p
		case class == 10 && method == 50 && len(p) >= 7 && int(p[6]) <= len(p)-7:
			a.err = fmt.Errorf("broker refused: %d %s", binary.BigEndian.Uint16(p[4:]), p[7:7+int(p[6])])
		default:
			a.err = fmt.Errorf("unexpected method %d.%d", class, method)
		}
	}
	return nil
}

func (a *amqpConn) frame() (typ byte, payload []byte) {
	var h [7]byte
	if _, a.err = io.ReadFull(a.r, h[:]); a.err != nil {
		if errors.Is(a.err, io.EOF) {
			a.err = errors.New("broker closed the connection")
		}
		return 0, nil
	}
	// Handshake frames are small; a cap spares a huge allocation on garbage.
	p := make([]byte, min(binary.BigEndian.Uint32(h[3:]), 1<<20)+1)
	if _, a.err = io.ReadFull(a.r, p); a.err == nil && p[len(p)-1] != 0xCE {
		a.err = errors.New("bad frame end")
	}
	return h[0], p[:len(p)-1]
}

func amqpMethod(class, id uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, class), id)
}

func amqpShortstr(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }

func amqpLongstr(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}
