// compose-check validates a Compose file with compose-go, the loader
// Docker Compose v2 itself uses: schema, interpolation and references. It
// is how the test suite checks docker-compose.yml on machines without a
// Docker engine.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-check docker-compose.yml")
		os.Exit(2)
	}
	path, err := filepath.Abs(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts, err := cli.NewProjectOptions([]string{path}, cli.WithWorkingDirectory(filepath.Dir(path)), cli.WithName("portcullis"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s is not a valid Compose file: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	for _, name := range project.ServiceNames() {
		svc := project.Services[name]
		fmt.Printf("service %s: image %s, %d ports, healthcheck %t\n", name, svc.Image, len(svc.Ports), svc.HealthCheck != nil)
	}
}
