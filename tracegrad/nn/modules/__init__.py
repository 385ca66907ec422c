"""torch.nn's modules: the Module base, containers, layers and losses."""
from .module import Module
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .layers import (Identity, Linear, Conv1d, Conv2d, ConvTranspose2d, ReLU, LeakyReLU, GELU, SiLU, Sigmoid, Tanh,
                     Softplus, Softmax, LogSoftmax, Dropout, LayerNorm, GroupNorm, BatchNorm1d, BatchNorm2d, Embedding,
                     Flatten, Unflatten, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Upsample, CosineSimilarity,
                     PairwiseDistance, MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
                     InstanceNorm1d, InstanceNorm2d, PixelShuffle, Unfold, Fold, EmbeddingBag, RMSNorm,
                     LocalResponseNorm, LPPool1d, LPPool2d, RReLU)
from .activation import (ELU, CELU, SELU, Hardtanh, ReLU6, Hardsigmoid, Hardswish, Softsign, Tanhshrink, Mish,
                         Hardshrink, Softshrink, Softmin, GLU, PReLU, LogSigmoid, Threshold)
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .lazy import (LazyModuleMixin, LazyLinear, LazyConv1d, LazyConv2d, LazyConv3d, LazyBatchNorm1d, LazyBatchNorm2d,
                   LazyBatchNorm3d)
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .nd import (Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d, BatchNorm3d,
                 InstanceNorm3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, AlphaDropout, FeatureAlphaDropout,
                 TripletMarginWithDistanceLoss, FractionalMaxPool2d, FractionalMaxPool3d)
from .transformer import (MultiheadAttention, TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
                          TransformerDecoder, Transformer)
from .loss import (L1Loss, MSELoss, NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss, SmoothL1Loss, HuberLoss,
                   KLDivLoss, CosineEmbeddingLoss, MarginRankingLoss, HingeEmbeddingLoss, SoftMarginLoss,
                   MultiLabelSoftMarginLoss, MultiMarginLoss, MultiLabelMarginLoss,
                   TripletMarginLoss, GaussianNLLLoss, PoissonNLLLoss, CTCLoss)
from .more import (ZeroPad1d, ZeroPad2d, ZeroPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
                   ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, CircularPad1d,
                   CircularPad2d, CircularPad3d, Dropout1d,
                   Dropout2d, Dropout3d, ConvTranspose1d, PixelUnshuffle, ChannelShuffle, Softmax2d,
                   UpsamplingNearest2d, UpsamplingBilinear2d, Bilinear)
