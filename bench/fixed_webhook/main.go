// A fixed-answer admission webhook: every AdmissionReview allowed, with no warning, and no patch
// unless -patch names a file holding one (a JSON patch, returned as is to every review sent to
// /mutate: what the API server's patch handling costs, apart from the webhook's own work).
// bench/control_plane.py puts it behind gpu-admission's own webhook configurations, in
// place of gpu-admission, as the floor a webhook in the pod creation path costs: TLS, HTTP and
// JSON in Go, the language of the API server and of most webhooks beside ours. Test
// infrastructure only, never shipped.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
)

type request struct {
	UID string `json:"uid"`
}

type response struct {
	UID       string `json:"uid"`
	Allowed   bool   `json:"allowed"`
	PatchType string `json:"patchType,omitempty"`
	Patch     []byte `json:"patch,omitempty"` // encoding/json writes []byte as base64, as the API expects
}

var patch []byte // the fixed patch for /mutate, if any

type review struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Request    *request  `json:"request,omitempty"`
	Response   *response `json:"response,omitempty"`
}

func answer(w http.ResponseWriter, r *http.Request) {
	var asked review
	if err := json.NewDecoder(r.Body).Decode(&asked); err != nil || asked.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	answered := review{
		APIVersion: "admission.k8s.io/v1",
		Kind:       "AdmissionReview",
		Response:   &response{UID: asked.Request.UID, Allowed: true},
	}
	if patch != nil && r.URL.Path == "/mutate" {
		answered.Response.PatchType, answered.Response.Patch = "JSONPatch", patch
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(answered); err != nil {
		log.Print(err)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "where to listen")
	cert := flag.String("cert", "tls.crt", "the serving certificate")
	key := flag.String("key", "tls.key", "its key")
	patchFile := flag.String("patch", "", "a file holding a JSON patch to answer /mutate with")
	flag.Parse()
	if *patchFile != "" {
		read, err := os.ReadFile(*patchFile)
		if err != nil {
			log.Fatal(err)
		}
		patch = read
	}
	http.HandleFunc("/", answer)
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, nil))
}
