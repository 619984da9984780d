package notifier

import "github.com/dropstream/dropstream/notifier/channel"

// Channel delivers notifications over one medium; see channel.Channel.
type Channel = channel.Channel

// Recipient is who a notification goes to; see channel.Recipient.
type Recipient = channel.Recipient

// Notification is one message to one recipient; see channel.Notification.
type Notification = channel.Notification

// DeliveryError is the error of a failed send; see channel.DeliveryError.
type DeliveryError = channel.DeliveryError
