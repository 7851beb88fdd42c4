package server

// Routes returns the routes s serves, as registered: "METHOD /path", or
// "/path" for one that serves every method itself (/mcp).
func (s *Server) Routes() []string { return s.routes().patterns }
