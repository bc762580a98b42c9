package lockservice

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxBody bounds a request body.
const maxBody = 64 << 10

// decode reads the whole body (so that the server notices at once when the
// caller's connection closes) into v, refusing unknown fields and trailing
// data. It returns false after answering 400.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "bad JSON body: "+err.Error())
		return false
	}
	return true
}

// parseTimeout reads a request's timeout; "" is none. A zero duration
// ("0s") is refused unless the request is a try: it would read as "do not
// wait", which is what try says, while a timeout of 0 once meant waiting
// for ever. It returns false after answering 400.
func parseTimeout(w http.ResponseWriter, s string, try bool) (time.Duration, bool) {
	if s == "" {
		return 0, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("timeout %q is not a positive duration such as \"5s\" or \"250ms\"", s))
		return 0, false
	}
	if d == 0 && !try {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("timeout %q: to not wait, send \"try\": true instead; to wait until you leave, send no timeout", s))
		return 0, false
	}
	return d, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg, Code: code})
}
