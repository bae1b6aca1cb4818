package server

import "errors"

// Reload reads again every file the node was started with (SIGHUP): the
// token files (ReloadAuthToken) and the TLS certificate and key. A file
// that fails keeps what it would have replaced, is logged, and is part
// of the error returned; ErrNoTokenFile is no failure here.
func (s *Server) Reload() error {
	var errs []error
	if s.cfg.AuthTokenFile != "" {
		errs = append(errs, s.ReloadAuthToken())
	}
	if s.cert != nil {
		if err := s.cert.reload(); err != nil {
			s.log.Error("TLS certificate reload failed; keeping the current one", "err", err)
			errs = append(errs, err)
		} else {
			s.log.Info("TLS certificate reloaded", "cert_file", s.cert.certFile)
		}
	}
	if s.cfg.AuthTokenFile == "" && s.cert == nil {
		s.log.Warn("reload asked, but the node was started with no token file and no certificate")
	}
	return errors.Join(errs...)
}
