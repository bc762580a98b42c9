package lockservice_test

// A small checker of the service against docs/openapi.json: the routes
// served are the routes documented, every documented route answers with a
// documented status and content type, and the JSON field names of every
// body are the schema's.

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

type apiSchema struct {
	Ref        string               `json:"$ref"`
	Type       string               `json:"type"`
	Required   []string             `json:"required"`
	Properties map[string]apiSchema `json:"properties"`
	Items      *apiSchema           `json:"items"`
}

type apiContent map[string]struct {
	Schema apiSchema `json:"schema"`
}

type apiOp struct {
	RequestBody *struct {
		Content apiContent `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content apiContent `json:"content"`
	} `json:"responses"`
}

type apiDoc struct {
	Paths      map[string]map[string]apiOp `json:"paths"`
	Components struct {
		Schemas map[string]apiSchema `json:"schemas"`
	} `json:"components"`
}

var (
	specOnce sync.Once
	spec     apiDoc
)

func openAPI(t *testing.T) *apiDoc {
	t.Helper()
	specOnce.Do(func() {
		b, err := os.ReadFile("../../../../docs/openapi.json")
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &spec))
	})
	return &spec
}

// schemaTypes are the Go types of the documented schemas.
var schemaTypes = map[string]any{
	"AcquireRequest": lockservice.AcquireRequest{}, "CampaignRequest": lockservice.CampaignRequest{},
	"ReleaseRequest": lockservice.ReleaseRequest{}, "ReleaseResponse": lockservice.ReleaseResponse{},
	"Event": lockservice.Event{}, "Contender": lockservice.Contender{}, "StatusResponse": lockservice.StatusResponse{},
	"LeaderResponse": lockservice.LeaderResponse{}, "HealthResponse": lockservice.HealthResponse{},
	"ErrorResponse":     lockservice.ErrorResponse{},
	"LeaseGrantRequest": lockservice.LeaseGrantRequest{}, "LeaseRequest": lockservice.LeaseRequest{},
	"LeaseResponse": lockservice.LeaseResponse{}, "LeaseHolding": lockservice.LeaseHolding{},
	"LeaseAcquireRequest": lockservice.LeaseAcquireRequest{}, "LeaseAcquireResponse": lockservice.LeaseAcquireResponse{},
	"LeaseReleaseRequest": lockservice.LeaseReleaseRequest{}, "RevokeResponse": lockservice.RevokeResponse{},
}

func TestOpenAPIRoutesAreTheServedOnes(t *testing.T) {
	t.Parallel()
	doc := openAPI(t)
	var documented, served []string
	for p, ops := range doc.Paths {
		for m := range ops {
			documented = append(documented, strings.ToUpper(m)+" "+p)
		}
	}
	for _, rt := range lockservice.Routes() {
		served = append(served, rt.Method+" "+rt.Path)
	}
	sort.Strings(documented)
	sort.Strings(served)
	require.Equal(t, documented, served)
}

func TestOpenAPIFieldNames(t *testing.T) {
	t.Parallel()
	doc := openAPI(t)
	var names []string
	for n := range doc.Components.Schemas {
		names = append(names, n)
	}
	require.ElementsMatch(t, names, slices.Collect(maps.Keys(schemaTypes)), "every schema has its Go type")
	for name, v := range schemaTypes {
		s := doc.Components.Schemas[name]
		var props, required []string
		for f := range s.Properties {
			props = append(props, f)
		}
		typ := reflect.TypeOf(v)
		var fields, mandatory []string
		for i := range typ.NumField() {
			tag := strings.Split(typ.Field(i).Tag.Get("json"), ",")
			fields = append(fields, tag[0])
			if !slices.Contains(tag[1:], "omitempty") && !slices.Contains(tag[1:], "omitzero") {
				mandatory = append(mandatory, tag[0])
			}
		}
		required = append(required, s.Required...)
		require.ElementsMatch(t, fields, props, "%s: the Go fields are the documented properties", name)
		require.ElementsMatch(t, mandatory, required, "%s: fields without omitempty are the required ones", name)
	}
}

// TestOpenAPIEveryRouteAnswers sends each documented operation a minimal
// request: it answers with a status the description lists, in its content type.
func TestOpenAPIEveryRouteAnswers(t *testing.T) {
	t.Parallel()
	doc := openAPI(t)
	s := serve(t, lockservice.Config{})
	for p, ops := range doc.Paths {
		for m, op := range ops {
			method := strings.ToUpper(m)
			var body any
			if op.RequestBody != nil {
				body = "{}"
			}
			resp := s.do(t, method, p, body)
			resp.Body.Close()
			r, ok := op.Responses[itoa(resp.StatusCode)]
			require.True(t, ok, "%s %s answered %d, not documented", method, p, resp.StatusCode)
			ct := strings.Split(resp.Header.Get("Content-Type"), ";")[0]
			_, ok = r.Content[ct]
			require.True(t, ok, "%s %s answered %d in %s, not documented", method, p, resp.StatusCode, ct)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// checkSchema checks v's JSON against the schema name.
func checkSchema(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	checkSchemaJSON(t, name, b)
}

// checkSchemaJSON checks that raw is an object of schema name: no field the
// schema lacks, every required one present (nested objects too).
func checkSchemaJSON(t *testing.T, name string, raw []byte) {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	checkValue(t, openAPI(t), name, apiSchema{Ref: "#/components/schemas/" + name}, v)
}

func checkValue(t *testing.T, doc *apiDoc, at string, s apiSchema, v any) {
	t.Helper()
	if s.Ref != "" {
		s = doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	switch x := v.(type) {
	case map[string]any:
		for k, fv := range x {
			ps, ok := s.Properties[k]
			require.True(t, ok, "%s: field %q is not documented", at, k)
			checkValue(t, doc, at+"."+k, ps, fv)
		}
		for _, r := range s.Required {
			_, ok := x[r]
			require.True(t, ok, "%s: required field %q missing", at, r)
		}
	case []any:
		for _, e := range x {
			checkValue(t, doc, at+"[]", *s.Items, e)
		}
	}
}
