// `cordon/client`: the typed client of `cordon serve` (docs/service.md#the-client).

export type { OutputData, RunResult } from '../index.js'
export type {
  Client,
  ClientEvent,
  ConnectOptions,
  EndResult,
  EventsOptions,
  ListFilter,
  RequestOptions,
  RunEventData,
  RunRequestBody,
  RunSummaryView,
  RunView,
} from './client.js'
export { ClientError, connect } from './client.js'
