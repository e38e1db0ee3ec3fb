import VsyncClientCore

/// Why a ``DisplayLink`` is not ticking: the client core's ``ClientError``, the same one-line
/// messages libvsync gives. Delivered to ``DisplayLink/errorHandler`` on the link's own context.
public typealias DisplayLinkError = ClientError
