package lockservice_test

import (
	"net/http"
	"net/http/httptest"
)

func newBenchServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }
