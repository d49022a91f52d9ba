"""Client wire formats. Each dialect decodes its requests into the canonical model and
encodes canonical responses back; dialects never import each other."""
