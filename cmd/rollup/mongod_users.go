package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"gopkg.in/yaml.v3"

	"github.com/gameops/rollup/embedded"
)

// usersFile is the format of rollup mongod --users FILE (YAML, or JSON, which YAML reads
// too). Each user gives its name, its authentication database (default admin) and either a
// password or the SCRAM-SHA-256 credentials usersInfo's showCredentials prints:
//
//	users:
//	  - user: alice
//	    password: "correct horse battery staple"
//	  - user: ci
//	    db: admin
//	    credentials:
//	      SCRAM-SHA-256: {iterationCount: 15000, salt: "…", storedKey: "…", serverKey: "…"}
//
// The users of the file are not stored: they exist while the file names them.
type usersFile struct {
	Users []usersFileEntry `yaml:"users"`
}

type usersFileEntry struct {
	User        string `yaml:"user"`
	DB          string `yaml:"db"`
	Password    string `yaml:"password"`
	Credentials struct {
		SCRAMSHA256 *embedded.SCRAMCredentials `yaml:"SCRAM-SHA-256"`
	} `yaml:"credentials"`
}

// loadUsersFile reads a --users file strictly (an unknown field is an error). A file that
// holds a clear password must not be readable by group or others, as mongod's keyFile.
func loadUsersFile(path string) ([]embedded.User, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--users: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var f usersFile
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--users %s: %w", path, err)
	}
	if len(f.Users) == 0 {
		return nil, fmt.Errorf("--users %s: no users in it (want users: [{user: NAME, password: PASSWORD}, …])", path)
	}
	users := make([]embedded.User, len(f.Users))
	clear := false
	for i, u := range f.Users {
		users[i] = embedded.User{Name: u.User, DB: u.DB, Password: u.Password, SCRAMSHA256: u.Credentials.SCRAMSHA256}
		clear = clear || u.Password != ""
	}
	if err := embedded.CheckUsers(users); err != nil {
		return nil, fmt.Errorf("--users %s: %w", path, err)
	}
	if clear && runtime.GOOS != "windows" {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("--users: %w", err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("--users %s holds passwords and is readable by others (mode %v): chmod 600 it, or give SCRAM-SHA-256 credentials instead", path, st.Mode().Perm())
		}
	}
	return users, nil
}
