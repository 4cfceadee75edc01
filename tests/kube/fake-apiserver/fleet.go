// What the API client's fleet-scale and signal tests (issue 18 item 8, A6) need beyond
// main.go's commands.
//
// commands:
//   permit METHOD   undo "forbid METHOD": requests with that method are served again (an
//                   API server whose RBAC authorizer has synced after a restart)
package main

func init() {
	commands = append(commands, func(s *server, f []string) bool {
		if f[0] != "permit" || len(f) < 2 {
			return false
		}
		s.mu.Lock()
		delete(s.forbid, f[1])
		s.mu.Unlock()
		return true
	})
}
