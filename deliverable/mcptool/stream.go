package mcptool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeConn serves s on one newline-delimited JSON stream (a socket, a
// pipe: one MCP session) until the client disconnects or ctx ends, with
// ServeStdio's guards: a line that is not one JSON-RPC 2.0 message, is
// over MaxRequestBytes or nests deeper than MaxNesting is answered (or, a
// notification, dropped) without reaching the SDK, whose stream transport
// would end the session on it. log (nil: discarded) gets what was dropped.
// rwc is closed when ServeConn returns.
func ServeConn(ctx context.Context, s *mcp.Server, rwc io.ReadWriteCloser, log *slog.Logger) error {
	defer rwc.Close()
	return serveStream(ctx, s, rwc, rwc, log)
}

func serveStream(ctx context.Context, s *mcp.Server, r io.Reader, w io.Writer, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := &lineWriter{w: w}
	pr, pw := io.Pipe()
	go func() { _ = pw.CloseWithError(filterLines(r, pw, out, log)) }()
	t := &mcp.IOTransport{Reader: pr, Writer: nopCloser{out}, MaxLineLength: MaxRequestBytes + 1}
	err := serveIO(ctx, s, t)
	_ = pr.Close() // the filter's next write to the SDK ends it
	out.stop()     // and it writes no answer after ServeConn returned
	return err
}

// lineWriter serializes whole messages from the SDK and the filter; after
// stop it writes nothing.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	stopped bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return 0, io.ErrClosedPipe
	}
	return l.w.Write(p)
}

func (l *lineWriter) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// errLineTooLong: a line over MaxRequestBytes; the rest of it is skipped.
var errLineTooLong = errors.New("line too long")

// filterLines copies the messages of r that guard passes to sdk, one a
// line, and answers the others on out. It returns nil at the end of r.
func filterLines(r io.Reader, sdk io.Writer, out io.Writer, log *slog.Logger) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if errors.Is(err, errLineTooLong) {
			log.Warn("mcptool: message over MaxRequestBytes dropped", "max", MaxRequestBytes)
			msg := rpcError(nil, -32600, fmt.Sprintf("invalid request: the message is over %d bytes", MaxRequestBytes))
			if _, err := out.Write(append(msg, '\n')); err != nil {
				return err
			}
			continue
		}
		if len(line) > 0 {
			v := guard(line)
			switch {
			case v.ok:
				if _, werr := sdk.Write(append(line, '\n')); werr != nil {
					return werr
				}
			case v.answer != nil:
				log.Debug("mcptool: message answered without the server", "why", v.log)
				if _, werr := out.Write(append(v.answer, '\n')); werr != nil {
					return werr
				}
			default:
				log.Debug("mcptool: message dropped", "why", v.log)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line without its newline, at most MaxRequestBytes
// held: a longer one is skipped to its end and reported as errLineTooLong.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxRequestBytes+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// guardHTTP answers a POST body that guard does not pass, as Handler's
// SDK handler would have answered a tool call (200 and a JSON-RPC message),
// and hands the others on with the body it read.
func guardHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			http.Error(w, fmt.Sprintf("the request body is over %d bytes; send one smaller JSON-RPC message", MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if nesting(body) > MaxNesting {
			if v := guard(body); v.answer != nil {
				status := http.StatusBadRequest
				if v.result {
					status = http.StatusOK
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write(v.answer)
				return
			}
			w.WriteHeader(http.StatusAccepted) // a notification: nothing to answer
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}
