package agenthost

import (
	"path/filepath"
	"slices"
)

// planClaude configures Claude Code:
//   - the MCP server: .mcp.json in the project, or the user's
//     ~/.claude.json;
//   - the hooks, and the tools allowed by name (as root, Claude Code
//     refuses to skip its permission prompts): .claude/settings.json in
//     the project, or ~/.claude/settings.json. The project's file also
//     enables the project's MCP server, which Claude Code's terminal
//     otherwise asks about.
func (s Setup) planClaude(uninstall bool) ([]Edit, error) {
	serversFile := filepath.Join(s.Home, ".claude.json")
	settingsFile := filepath.Join(s.Home, ".claude", "settings.json")
	if s.Scope == ScopeProject {
		serversFile = filepath.Join(s.Dir, ".mcp.json")
		settingsFile = filepath.Join(s.Dir, ".claude", "settings.json")
	}
	servers, err := editJSON(serversFile, func(m map[string]any) error {
		had := keys(m)
		ss := object(m, "mcpServers")
		delete(ss, ServerName)
		if !uninstall {
			entry := map[string]any{"type": "stdio", "command": s.Hermes, "args": []any{"mcp"}}
			if len(s.Env) > 0 {
				env := map[string]any{}
				for k, v := range s.Env {
					env[k] = v
				}
				entry["env"] = env
			}
			ss[ServerName] = entry
		}
		dropNew(m, had, "mcpServers")
		return nil
	})
	if err != nil {
		return nil, err
	}
	settings, err := editJSON(settingsFile, func(m map[string]any) error {
		had := keys(m)
		hooks := object(m, "hooks")
		s.editHooks(hooks, uninstall)
		perms := object(m, "permissions")
		hadPerms := keys(perms)
		perms["allow"] = editList(perms["allow"], ToolNames, uninstall)
		dropNew(perms, hadPerms, "allow")
		if s.Scope == ScopeProject {
			m["enabledMcpjsonServers"] = editList(m["enabledMcpjsonServers"], []string{ServerName}, uninstall)
		}
		dropNew(m, had, "hooks", "permissions", "enabledMcpjsonServers")
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []Edit{servers, settings}, nil
}

// editList adds names to a JSON list of strings (removes them, when
// uninstall), keeping the rest in order.
func editList(v any, names []string, uninstall bool) []any {
	list, _ := v.([]any)
	out := list[:0:0]
	for _, x := range list {
		if str, ok := x.(string); ok && slices.Contains(names, str) {
			continue
		}
		out = append(out, x)
	}
	if !uninstall {
		for _, n := range names {
			out = append(out, n)
		}
	}
	return out
}
