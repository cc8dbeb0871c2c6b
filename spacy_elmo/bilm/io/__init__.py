"""The biLM's files: the published formats (bilm-tf/AllenNLP HDF5, ELMoForManyLangs), where
a name or path finds them, and the checks that their numbers are finite."""
