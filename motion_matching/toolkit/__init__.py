"""The toolkit's files: binary layouts, their strict readers and writers, quaternions and the skeleton."""
