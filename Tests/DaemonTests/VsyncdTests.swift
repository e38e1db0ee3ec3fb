import Testing

/// Every test starts its own vsyncd; they run one at a time so the timing checks are not
/// disturbed by other daemons on a 2-core machine.
@Suite(.serialized) enum VsyncdTests {}
