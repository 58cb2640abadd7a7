"""A toy kind of evaluation, in a folder of its own as every kind is: parity judged by the
worse of its accuracies at two lengths. tests/test_toy_protocol.py registers it with one
line (`posenc.kinds.KINDS['toy'] = 'toy_kind'`)."""
