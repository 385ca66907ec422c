"""Primitives for the regularized incomplete gamma functions (torch.igamma / igammac, torch.special's
gammainc / gammaincc), registered into the op table of primitives.py.

The kernels are torch's CPU kernels (aten/src/ATen/native/Math.h, SciPy's igam and igamc: the
power series, the complementary series, the continued fraction and Temme's uniform asymptotic
expansion, chosen by a and |x - a| / a as there) over whole arrays in the operands' dtype: float64, or
float32 for float32, float16 and bfloat16 (torch computes those in float and rounds once). Out of the
domain (a < 0 or x < 0, both 0, both inf) NaN, as torch's. torch has no kernel for integer or bool
operands (its NotImplementedError).
Derivatives, as torch's derivatives.yaml: none in a (torch's NotImplementedError when the backward
runs), +-exp((a - 1) log x - x - lgamma(a)) in x, in tracegrad's ops. No Triton lowering: on CUDA
tensors they run their numpy kernel on a host copy.

The reparameterized gamma draw builds on them: _standard_gamma (a host draw as a function of its
concentration, torch's StandardGammaBackward0) differentiates through _standard_gamma_grad, the
implicit derivative of the draw at its quantile (see _standard_gamma_grad), which has no derivative
of its own (torch's NotImplementedError).
"""
import numpy as np

from . import lowering as T
from .primitives import F, FrontEnd, PRIMITIVES, binary, _no_kernel, FORWARD_AD_NOT_IMPLEMENTED
from .gamma_primitives import _lgamma, _digamma64
from .special_primitives import compute_dtype, _libm, _fma, _WIDE

_HOST = T.Refuse("runs its numpy kernel on the host")

_LANCZOS_NUM = (0.006061842346248906525783753964555936883222, 0.5098416655656676188125178644804694509993,
                19.51992788247617482847860966235652136208, 449.9445569063168119446858607650988409623,
                6955.999602515376140356310115515198987526, 75999.29304014542649875303443598909137092,
                601859.6171681098786670226533699352302507, 3481712.15498064590882071018964774556468,
                14605578.08768506808414169982791359218571, 43338889.32467613834773723740590533316085,
                86363131.28813859145546927288977868422342, 103794043.1163445451906271053616070238554,
                56906521.91347156388090791033559122686859)
_LANCZOS_DEN = (1., 66., 1925., 32670., 357423., 2637558., 13339535., 45995730., 105258076., 150917976.,
                120543840., 39916800., 0.)
_LANCZOS_G = 6.024680040776729583740234375
_EXP1 = 2.718281828459045
_MAXITER = 2000

# Temme's coefficients d[k][n] (DLMF 8.12), as torch's
_IGAM_D = (
    (-3.3333333333333333e-1, 8.3333333333333333e-2, -1.4814814814814815e-2, 1.1574074074074074e-3,
     3.527336860670194e-4, -1.7875514403292181e-4, 3.9192631785224378e-5, -2.1854485106799922e-6,
     -1.85406221071516e-6, 8.296711340953086e-7, -1.7665952736826079e-7, 6.7078535434014986e-9,
     1.0261809784240308e-8, -4.3820360184533532e-9, 9.1476995822367902e-10, -2.551419399494625e-11,
     -5.8307721325504251e-11, 2.4361948020667416e-11, -5.0276692801141756e-12, 1.1004392031956135e-13,
     3.3717632624009854e-13, -1.3923887224181621e-13, 2.8534893807047443e-14, -5.1391118342425726e-16,
     -1.9752288294349443e-15),
    (-1.8518518518518519e-3, -3.4722222222222222e-3, 2.6455026455026455e-3, -9.9022633744855967e-4,
     2.0576131687242798e-4, -4.0187757201646091e-7, -1.8098550334489978e-5, 7.6491609160811101e-6,
     -1.6120900894563446e-6, 4.6471278028074343e-9, 1.378633446915721e-7, -5.752545603517705e-8,
     1.1951628599778147e-8, -1.7543241719747648e-11, -1.0091543710600413e-9, 4.1627929918425826e-10,
     -8.5639070264929806e-11, 6.0672151016047586e-14, 7.1624989648114854e-12, -2.9331866437714371e-12,
     5.9966963656836887e-13, -2.1671786527323314e-16, -4.9783399723692616e-14, 2.0291628823713425e-14,
     -4.13125571381061e-15),
    (4.1335978835978836e-3, -2.6813271604938272e-3, 7.7160493827160494e-4, 2.0093878600823045e-6,
     -1.0736653226365161e-4, 5.2923448829120125e-5, -1.2760635188618728e-5, 3.4235787340961381e-8,
     1.3721957309062933e-6, -6.298992138380055e-7, 1.4280614206064242e-7, -2.0477098421990866e-10,
     -1.4092529910867521e-8, 6.228974084922022e-9, -1.3670488396617113e-9, 9.4283561590146782e-13,
     1.2872252400089318e-10, -5.5645956134363321e-11, 1.1975935546366981e-11, -4.1689782251838635e-15,
     -1.0940640427884594e-12, 4.6622399463901357e-13, -9.905105763906906e-14, 1.8931876768373515e-17,
     8.8592218725911273e-15),
    (6.4943415637860082e-4, 2.2947209362139918e-4, -4.6918949439525571e-4, 2.6772063206283885e-4,
     -7.5618016718839764e-5, -2.3965051138672967e-7, 1.1082654115347302e-5, -5.6749528269915966e-6,
     1.4230900732435884e-6, -2.7861080291528142e-11, -1.6958404091930277e-7, 8.0994649053880824e-8,
     -1.9111168485973654e-8, 2.3928620439808118e-12, 2.0620131815488798e-9, -9.4604966618551322e-10,
     2.1541049775774908e-10, -1.388823336813903e-14, -2.1894761681963939e-11, 9.7909989511716851e-12,
     -2.1782191880180962e-12, 6.2088195734079014e-17, 2.126978363279737e-13, -9.3446887915174333e-14,
     2.0453671226782849e-14),
    (-8.618882909167117e-4, 7.8403922172006663e-4, -2.9907248030319018e-4, -1.4638452578843418e-6,
     6.6414982154651222e-5, -3.9683650471794347e-5, 1.1375726970678419e-5, 2.5074972262375328e-10,
     -1.6954149536558306e-6, 8.9075075322053097e-7, -2.2929348340008049e-7, 2.956794137544049e-11,
     2.8865829742708784e-8, -1.4189739437803219e-8, 3.4463580499464897e-9, -2.3024517174528067e-13,
     -3.9409233028046405e-10, 1.8602338968504502e-10, -4.356323005056618e-11, 1.2786001016296231e-15,
     4.6792750266579195e-12, -2.1492464706134829e-12, 4.9088156148096522e-13, -6.3385914848915603e-18,
     -5.0453320690800944e-14),
    (-3.3679855336635815e-4, -6.9728137583658578e-5, 2.7727532449593921e-4, -1.9932570516188848e-4,
     6.7977804779372078e-5, 1.419062920643967e-7, -1.3594048189768693e-5, 8.0184702563342015e-6,
     -2.2914811765080952e-6, -3.252473551298454e-10, 3.4652846491085265e-7, -1.8447187191171343e-7,
     4.8240967037894181e-8, -1.7989466721743515e-14, -6.3061945000135234e-9, 3.1624176287745679e-9,
     -7.8409242536974293e-10, 5.1926791652540407e-15, 9.3589442423067836e-11, -4.5134262161632782e-11,
     1.0799129993116827e-11, -3.661886712685252e-17, -1.210902069055155e-12, 5.6807435849905643e-13,
     -1.3249659916340829e-13),
    (5.3130793646399222e-4, -5.9216643735369388e-4, 2.7087820967180448e-4, 7.9023532326603279e-7,
     -8.1539693675619688e-5, 5.6116827531062497e-5, -1.8329116582843376e-5, -3.0796134506033048e-9,
     3.4651553688036091e-6, -2.0291327396058604e-6, 5.7887928631490037e-7, 2.338630673826657e-13,
     -8.8286007463304835e-8, 4.7435958880408128e-8, -1.2545415020710382e-8, 8.6496488580102925e-14,
     1.6846058979264063e-9, -8.5754928235775947e-10, 2.1598224929232125e-10, -7.6132305204761539e-16,
     -2.6639822008536144e-11, 1.3065700536611057e-11, -3.1799163902367977e-12, 4.7109761213674315e-18,
     3.6902800842763467e-13),
    (3.4436760689237767e-4, 5.1717909082605922e-5, -3.3493161081142236e-4, 2.812695154763237e-4,
     -1.0976582244684731e-4, -1.2741009095484485e-7, 2.7744451511563644e-5, -1.8263488805711333e-5,
     5.7876949497350524e-6, 4.9387589339362704e-10, -1.0595367014026043e-6, 6.1667143761104075e-7,
     -1.7562973359060462e-7, -1.2974473287015439e-12, 2.695423606288966e-8, -1.4578352908731271e-8,
     3.887645959386175e-9, -3.8810022510194121e-17, -5.3279941738772867e-10, 2.7437977643314845e-10,
     -6.9957960920705679e-11, 2.5899863874868481e-17, 8.8566890996696381e-12, -4.403168815871311e-12,
     1.0865561947091654e-12),
    (-6.5262391859530942e-4, 8.3949872067208728e-4, -4.3829709854172101e-4, -6.969091458420552e-7,
     1.6644846642067548e-4, -1.2783517679769219e-4, 4.6299532636913043e-5, 4.5579098679227077e-9,
     -1.0595271125805195e-5, 6.7833429048651666e-6, -2.1075476666258804e-6, -1.7213731432817145e-11,
     3.7735877416110979e-7, -2.1867506700122867e-7, 6.2202288040189269e-8, 6.5977038267330006e-16,
     -9.5903864974256858e-9, 5.2132144922808078e-9, -1.3991589583935709e-9, 5.382058999060575e-16,
     1.9484714275467745e-10, -1.0127287556389682e-10, 2.6077347197254926e-11, -5.0904186999932993e-18,
     -3.3721464474854592e-12),
    (-5.9676129019274625e-4, -7.2048954160200106e-5, 6.7823088376673284e-4, -6.4014752602627585e-4,
     2.7750107634328704e-4, 1.8197008380465151e-7, -8.4795071170685032e-5, 6.105192082501531e-5,
     -2.1073920183404862e-5, -8.8585890141255994e-10, 4.5284535953805377e-6, -2.8427815022504408e-6,
     8.7082341778646412e-7, 3.6886101871706965e-12, -1.5344695190702061e-7, 8.862466778790695e-8,
     -2.5184812301826817e-8, -1.0225912098215092e-14, 3.8969470758154777e-9, -2.1267304792235635e-9,
     5.7370135528051385e-10, -1.887749850169741e-19, -8.0931538694657866e-11, 4.2382723283449199e-11,
     -1.1002224534207726e-11),
    (1.3324454494800656e-3, -1.9144384985654775e-3, 1.1089369134596637e-3, 9.932404122642299e-7,
     -5.0874501293093199e-4, 4.2735056665392884e-4, -1.6858853767910799e-4, -8.1301893922784998e-9,
     4.5284402370562147e-5, -3.127053674781734e-5, 1.044986828530338e-5, 4.8435226265680926e-11,
     -2.1482565873456258e-6, 1.329369701097492e-6, -4.0295693092101029e-7, -1.7567877666323291e-13,
     7.0145043163668257e-8, -4.040787734999483e-8, 1.1474026743371963e-8, 3.9642746853563325e-18,
     -1.7804938269892714e-9, 9.7480262548731646e-10, -2.6405338676507616e-10, 5.794875163403742e-18,
     3.7647749553543836e-11),
    (1.579727660730835e-3, 1.6251626278391582e-4, -2.0633421035543276e-3, 2.1389686185689098e-3,
     -1.0108559391263003e-3, -3.9912705529919201e-7, 3.6235025084764691e-4, -2.8143901463712154e-4,
     1.0449513336495887e-4, 2.1211418491830297e-9, -2.5779417251947842e-5, 1.7281818956040463e-5,
     -5.6413773872904282e-6, -1.1024320105776174e-11, 1.1223224418895175e-6, -6.8693396379526735e-7,
     2.0653236975414887e-7, 4.6714772409838506e-14, -3.5609886164949055e-8, 2.0470855345905963e-8,
     -5.8091738633283358e-9, -1.332821287582869e-16, 9.0354604391335133e-10, -4.9598782517330834e-10,
     1.3481607129399749e-10),
    (-4.0725121195140166e-3, 6.4033628338080698e-3, -4.0410161081676618e-3, -2.183732802866233e-6,
     2.1740441801254639e-3, -1.9700440518418892e-3, 8.3595469747962458e-4, 1.9445447567109655e-8,
     -2.5779387120421696e-4, 1.9009987368139304e-4, -6.7696499937438965e-5, -1.4440629666426572e-10,
     1.5712512518742269e-5, -1.0304008744776893e-5, 3.304517767401387e-6, 7.9829760242325709e-13,
     -6.4097794149313004e-7, 3.8894624761300056e-7, -1.1618347644948869e-7, -2.816808630596451e-15,
     1.9878012911297093e-8, -1.1407719956357511e-8, 3.2355857064185555e-9, 4.1759468293455945e-20,
     -5.0423112718105824e-10),
    (-5.9475779383993003e-3, -5.4016476789260452e-4, 8.7910413550767898e-3, -9.8576315587856125e-3,
     5.0134695031021538e-3, 1.2807521786221875e-6, -2.0626019342754683e-3, 1.7109128573523058e-3,
     -6.7695312714133799e-4, -6.9011545676562133e-9, 1.8855128143995902e-4, -1.3395215663491969e-4,
     4.6263183033528039e-5, 4.0034230613321351e-11, -1.0255652921494033e-5, 6.612086372797651e-6,
     -2.0913022027253008e-6, -2.0951775649603837e-13, 3.9756029041993247e-7, -2.3956211978815887e-7,
     7.1182883382145864e-8, 8.925574873053455e-16, -1.2101547235064676e-8, 6.9350618248334386e-9,
     -1.9661464453856102e-9),
    (1.7402027787522711e-2, -2.9527880945699121e-2, 2.0045875571402799e-2, 7.0289515966903407e-6,
     -1.2375421071343148e-2, 1.1976293444235254e-2, -5.4156038466518525e-3, -6.3290893396418616e-8,
     1.8855118129005065e-3, -1.473473274825001e-3, 5.5515810097708387e-4, 5.2406834412550662e-10,
     -1.4357913535784836e-4, 9.9181293224943297e-5, -3.3460834749478311e-5, -3.5755837291098993e-12,
     7.1560851960630076e-6, -4.5516802628155526e-6, 1.4236576649271475e-6, 1.8803149082089664e-14,
     -2.6623403898929211e-7, 1.5950642189595716e-7, -4.7187514673841102e-8, -6.5107872958755177e-17,
     7.9795091026746235e-9),
    (3.0249124160905891e-2, 2.4817436002649977e-3, -4.9939134373457022e-2, 5.9915643009307869e-2,
     -3.2483207601623391e-2, -5.7212968652103441e-6, 1.5085251778569354e-2, -1.3261324005088445e-2,
     5.5515262632426148e-3, 3.0263182257030016e-8, -1.7229548406756723e-3, 1.2893570099929637e-3,
     -4.6845138348319876e-4, -1.830259937893045e-10, 1.1449739014822654e-4, -7.7378565221244477e-5,
     2.5625836246985201e-5, 1.0766165333192814e-12, -5.3246809282422621e-6, 3.349634863064464e-6,
     -1.0381253128684018e-6, -5.608909920621128e-15, 1.9150821930676591e-7, -1.1418365800203486e-7,
     3.3654425209171788e-8),
    (-9.9051020880159045e-2, 1.7954011706123486e-1, -1.2989606383463778e-1, -3.1478872752284357e-5,
     9.0510635276848131e-2, -9.2828824411184397e-2, 4.4412112839877808e-2, 2.7779236316835888e-7,
     -1.7229543805449697e-2, 1.4182925050891573e-2, -5.6214161633747336e-3, -2.39598509186381e-9,
     1.6029634366079908e-3, -1.1606784674435773e-3, 4.1001337768153873e-4, 1.8365800754090661e-11,
     -9.5844256563655903e-5, 6.3643062337764708e-5, -2.076250624489065e-5, -1.1806020912804483e-13,
     4.2131808239120649e-6, -2.6262241337012467e-6, 8.0770620494930662e-7, 6.0125912123632725e-16,
     -1.4729737374018841e-7),
    (-1.9994542198219728e-1, -1.5056113040026424e-2, 3.6470239469348489e-1, -4.6435192311733545e-1,
     2.6640934719197893e-1, 3.4038266027147191e-5, -1.3784338709329624e-1, 1.276467178337056e-1,
     -5.6213828755200985e-2, -1.753150885483011e-7, 1.9235592956768113e-2, -1.5088821281095315e-2,
     5.7401854451350123e-3, 1.0622382710310225e-9, -1.5335082692563998e-3, 1.0819320643228214e-3,
     -3.7372510193945659e-4, -6.6170909729031985e-12, 8.4263617380909628e-5, -5.5150706827483479e-5,
     1.7769536448348069e-5, 3.8827923210205533e-14, -3.53513697488768e-6, 2.1865832130045269e-6,
     -6.6812849447625594e-7),
    (7.2438608504029431e-1, -1.3918010932653375, 1.0654143352413968, 1.876173868950258e-4, -8.2705501176152696e-1,
     8.9352433347828414e-1, -4.4971003995291339e-1, -1.6107401567546652e-6, 1.9235590165271091e-1,
     -1.6597702160042609e-1, 6.8882222681814333e-2, 1.3910091724608687e-8, -2.146911561508663e-2,
     1.6228980898865892e-2, -5.9796016172584256e-3, -1.1287469112826745e-10, 1.5167451119784857e-3,
     -1.0478634293553899e-3, 3.5539072889126421e-4, 8.1704322111801517e-13, -7.7773013442452395e-5,
     5.0291413897007722e-5, -1.6035083867000518e-5, 1.2469354315487605e-14, 3.1369106244517615e-6),
    (1.6668949727276811, 1.165462765994632e-1, -3.3288393225018906, 4.4692325482864037, -2.6977693045875807,
     -2.600667859891061e-4, 1.5389017615694539, -1.4937962361134612, 6.8881964633233148e-1, 1.3077482004552385e-6,
     -2.5762963325596288e-1, 2.1097676102125449e-1, -8.3714408359219882e-2, -7.7920428881354753e-9,
     2.4267923064833599e-2, -1.7813678334552311e-2, 6.3970330388900056e-3, 4.9430807090480523e-11,
     -1.5554602758465635e-3, 1.0561196919903214e-3, -3.5277184460472902e-4, 9.3002334645022459e-14,
     7.5285855026557172e-5, -4.8186515569156351e-5, 1.5227271505597605e-5),
    (-6.6188298861372935, 1.3397985455142589e+1, -1.0789350606845146e+1, -1.4352254537875018e-3, 9.2333694596189809,
     -1.0456552819547769e+1, 5.5105526029033471, 1.2024439690716742e-5, -2.5762961164755816, 2.3207442745387179,
     -1.0045728797216284, -1.0207833290021914e-7, 3.3975092171169466e-1, -2.6720517450757468e-1,
     1.0235252851562706e-1, 8.4329730484871625e-10, -2.7998284958442595e-2, 2.0066274144976813e-2,
     -7.0554368915086242e-3, 1.9402238183698188e-12, 1.6562888105449611e-3, -1.1082898580743683e-3,
     3.654545161310169e-4, -5.1290032026971794e-11, -7.6340103696869031e-5),
    (-1.7112706061976095e+1, -1.1208044642899116, 3.7131966511885444e+1, -5.2298271025348962e+1,
     3.3058589696624618e+1, 2.4791298976200222e-3, -2.061089403411526e+1, 2.088672775145582e+1,
     -1.0045703956517752e+1, -1.2238783449063012e-5, 4.0770134274221141, -3.473667358470195, 1.4329352617312006,
     7.1359914411879712e-8, -4.4797257159115612e-1, 3.4112666080644461e-1, -1.2699786326594923e-1,
     -2.8953677269081528e-10, 3.3125776278259863e-2, -2.3274087021036101e-2, 8.0399993503648882e-3,
     -1.177805216235265e-9, -1.8321624891071668e-3, 1.2108282933588665e-3, -3.9479941246822517e-4),
    (7.389033153567425e+1, -1.5680141270402273e+2, 1.322177542759164e+2, 1.3692876877324546e-2,
     -1.2366496885920151e+2, 1.4620689391062729e+2, -8.0365587724865346e+1, -1.1259851148881298e-4,
     4.0770132196179938e+1, -3.8210340013273034e+1, 1.719522294277362e+1, 9.3519707955168356e-7, -6.2716159907747034,
     5.1168999071852637, -2.0319658112299095, -4.9507215582761543e-9, 5.9626397294332597e-1, -4.4220765337238094e-1,
     1.6079998700166273e-1, -2.4733786203223402e-8, -4.0307574759979762e-2, 2.7849050747097869e-2,
     -9.4751858992054221e-3, 6.419922235909132e-6, 2.1250180774699461e-3),
    (2.1216837098382522e+2, 1.3107863022633868e+1, -4.9698285932871748e+2, 7.3121595266969204e+2,
     -4.8213821720890847e+2, -2.8817248692894889e-2, 3.2616720302947102e+2, -3.4389340280087117e+2,
     1.7195193870816232e+2, 1.4038077378096158e-4, -7.52594195897599e+1, 6.651969984520934e+1,
     -2.8447519748152462e+1, -7.613702615875391e-7, 9.5402237105304373, -7.5175301113311376, 2.8943997568871961,
     -4.6612194999538201e-7, -8.0615149598794088e-1, 5.8483006570631029e-1, -2.0845408972964956e-1,
     1.4765818959305817e-4, 5.1000433863753019e-2, -3.3066252141883665e-2, 1.5109265210467774e-2),
    (-9.8959643098322368e+2, 2.1925555360905233e+3, -1.9283586782723356e+3, -1.5925738122215253e-1,
     1.9569985945919857e+3, -2.4072514765081556e+3, 1.3756149959336496e+3, 1.2920735237496668e-3,
     -7.525941715948055e+2, 7.3171668742208716e+2, -3.4137023466220065e+2, -9.9857390260608043e-6,
     1.3356313181291573e+2, -1.1276295161252794e+2, 4.6310396098204458e+1, -7.9237387133614756e-6,
     -1.4510726927018646e+1, 1.1111771248100563e+1, -4.1690817945270892, 3.1008219800117808e-3, 1.1220095449981468,
     -7.6052379926149916e-1, 3.6262236505085254e-1, 2.216867741940747e-1, 4.8683443692930507e-1),
)


def _pow(a, b, t):
    """The C library's pow of dtype t: from the wider one, rounded once."""
    w = np.float64 if t is np.float32 else _WIDE
    with np.errstate(all="ignore"):
        return np.power(a.astype(w), b.astype(w)).astype(t)


def _consts(t):
    if t is np.float64:
        return 1.11022302462515654042E-16, 7.09782712893383996843E2, 4.503599627370496e15, 2.22044604925031308085e-16
    return 5.9604644775390625E-8, 88.72283905206835, 16777216., 5.9604644775390625E-8


def _lanczos(a, t):
    """Boost's Lanczos sum (exp(g) scaled) at a > 0: the rational function in a up to 1, in 1 / a beyond."""
    big = np.abs(a) > 1
    y = np.where(big, t(1) / a, a)
    num = np.where(big, t(_LANCZOS_NUM[-1]), t(_LANCZOS_NUM[0]))
    den = np.where(big, t(_LANCZOS_DEN[-1]), t(_LANCZOS_DEN[0]))
    for i in range(1, 13):
        num = _fma(num, y, np.where(big, t(_LANCZOS_NUM[12 - i]), t(_LANCZOS_NUM[i])), t)
        den = _fma(den, y, np.where(big, t(_LANCZOS_DEN[12 - i]), t(_LANCZOS_DEN[i])), t)
    return num / den


def _fac(a, x, t):
    """x^a exp(-x) / Gamma(a) (SciPy's igam_fac)."""
    _, maxlog, _, _ = _consts(t)
    out = np.empty_like(a)
    far = np.abs(a - x).astype(np.float64) > 0.4 * np.abs(a).astype(np.float64)
    if far.any():
        af, xf = a[far], x[far]
        ax = _fma(af, _libm(np.log, xf, t), -xf, t) - _lgamma(af)
        out[far] = np.where(ax < -maxlog, t(0), _libm(np.exp, ax, t))
    near = ~far
    if near.any():
        an, xn = a[near], x[near]
        fac = an + t(_LANCZOS_G) - t(0.5)
        res = np.sqrt(fac / t(_EXP1)) / _lanczos(an, t)
        small = (an < 200) & (xn < 200)
        direct = _libm(np.exp, an - xn, t) * _pow(xn / fac, an, t)
        num = xn - an - t(_LANCZOS_G) + t(0.5)
        numfac = num / fac
        asym = _libm(np.exp, _fma(an, _libm(np.log1p, numfac, t) - numfac, xn * (t(0.5) - t(_LANCZOS_G)) / fac, t), t)
        out[near] = res * np.where(small, direct, asym)
    return out


def _igam_series(a, x, t):
    """The power series of P(a, x) (DLMF 8.11.4)."""
    machep = _consts(t)[0]
    ax = _fac(a, x, t)
    r = a.copy()
    c = np.ones_like(a)
    ans = np.ones_like(a)
    idx = np.nonzero(ax != 0)[0]
    for _ in range(_MAXITER):
        if not idx.size:
            break
        r[idx] += t(1)
        c[idx] *= x[idx] / r[idx]
        ans[idx] += c[idx]
        idx = idx[~(c[idx] <= machep * ans[idx])]
    return np.where(ax == 0, t(0), ans * ax / a)


def _igamc_series(a, x, t):
    """The series of Q(a, x) for small x (DLMF 8.7.3), free of P's cancellation."""
    machep = _consts(t)[0]
    fac = np.ones_like(a)
    total = np.zeros_like(a)
    idx = np.arange(a.size)
    for n in range(1, _MAXITER):
        if not idx.size:
            break
        fac[idx] *= -x[idx] / t(n)
        term = fac[idx] / (a[idx] + t(n))
        total[idx] += term
        idx = idx[~(np.abs(term) <= machep * np.abs(total[idx]))]
    logx = _libm(np.log, x, t)
    term = -_libm(np.expm1, _fma(a, logx, -_lgamma(t(1) + a), t), t)
    return term - _libm(np.exp, _fma(a, logx, -_lgamma(a), t), t) * total


def _asymptotic(a, x, t, igam):
    """Temme's uniform asymptotic expansion of P (igam) or Q (DLMF 8.12.3, 8.12.4)."""
    machep = _consts(t)[0]
    sgn = t(-1) if igam else t(1)
    lam = x / a
    sigma = (x - a) / a
    root = np.sqrt(t(-2) * (_libm(np.log1p, sigma, t) - sigma))
    eta = np.where(lam > 1, root, np.where(lam < 1, -root, t(0)))
    erfc = np.frompyfunc(__import__("math").erfc, 1, 1)
    res = t(0.5) * erfc((sgn * eta * np.sqrt(a / t(2))).astype(np.float64)).astype(np.float64).astype(t)
    etapow = [np.ones_like(a)]
    for _ in range(1, 25):
        etapow.append(eta * etapow[-1])
    total = np.zeros_like(a)
    afac = np.ones_like(a)
    absold = np.full_like(a, np.inf)
    live = np.ones(a.shape, bool)
    for k in range(25):
        ck = np.full_like(a, t(_IGAM_D[k][0]))
        on = np.ones(a.shape, bool)
        for n in range(1, 25):
            ckterm = t(_IGAM_D[k][n]) * etapow[n]
            ck = np.where(on, ck + ckterm, ck)
            on &= ~(np.abs(ckterm) < machep * np.abs(ck))
        term = ck * afac
        absterm = np.abs(term)
        live &= ~(absterm > absold)
        total = np.where(live, total + term, total)
        live &= ~(absterm < machep * np.abs(total))
        absold = np.where(live, absterm, absold)
        afac = np.where(live, afac / a, afac)
    return res + sgn * _libm(np.exp, t(-0.5) * a * eta * eta, t) * total / np.sqrt(t(2 * np.float32(np.pi)) * a)


def _igamc_fraction(a, x, t):
    """The continued fraction of Q(a, x) (DLMF 8.9.2)."""
    machep, _, big, biginv = _consts(t)
    ax = _fac(a, x, t)
    y = t(1) - a
    z = x + y + t(1)
    c = np.zeros_like(a)
    pkm2 = np.ones_like(a)
    qkm2 = x.copy()
    pkm1 = x + t(1)
    qkm1 = z * x
    ans = pkm1 / qkm1
    idx = np.nonzero(ax != 0)[0]
    for _ in range(_MAXITER):
        if not idx.size:
            break
        c[idx] += t(1)
        y[idx] += t(1)
        z[idx] += t(2)
        yc = y[idx] * c[idx]
        pk = _fma(pkm1[idx], z[idx], -(pkm2[idx] * yc), t)
        qk = _fma(qkm1[idx], z[idx], -(qkm2[idx] * yc), t)
        nz = qk != 0
        r = np.where(nz, pk / np.where(nz, qk, t(1)), ans[idx])
        tt = np.where(nz, np.abs((ans[idx] - r) / r), t(1))
        ans[idx] = r
        pkm2[idx], pkm1[idx], qkm2[idx], qkm1[idx] = pkm1[idx], pk, qkm1[idx], qk
        scale = np.abs(pk) > big
        if scale.any():
            s_ = idx[scale]
            pkm2[s_] *= biginv
            pkm1[s_] *= biginv
            qkm2[s_] *= biginv
            qkm1[s_] *= biginv
        idx = idx[~(tt <= machep)]
    return np.where(ax == 0, t(0), ans * ax)


def _regular(a, x, t):
    """Where neither boundary case applies: (mask of Temme's expansion, |x - a| / a)."""
    r = np.abs(x - a) / a
    return ((a > 20) & (a < 200) & (r < 0.3)) | ((a > 200) & (r < 4.5 / np.sqrt(a)))


def _igammac_core(a, x, t):
    out = np.empty_like(a)
    asym = _regular(a, x, t)
    if asym.any():
        out[asym] = _asymptotic(a[asym], x[asym], t, False)
    rest = ~asym
    # (torch's 1.1, 0.5 and 0.4 are double literals: a float32 x compares and multiplies in float64)
    xd, ad = x.astype(np.float64), a.astype(np.float64)
    with np.errstate(divide="ignore"):
        low = -0.4 / _libm(np.log, x, t).astype(np.float64) < ad
        use_p = np.where(xd > 1.1, x < a, np.where(xd <= 0.5, low, xd * 1.1 < ad))
    cf = rest & (xd > 1.1) & ~use_p
    ser_p = rest & use_p
    ser_q = rest & ~use_p & ~(xd > 1.1)
    if ser_p.any():
        out[ser_p] = t(1) - _igam_series(a[ser_p], x[ser_p], t)
    if cf.any():
        out[cf] = _igamc_fraction(a[cf], x[cf], t)
    if ser_q.any():
        out[ser_q] = _igamc_series(a[ser_q], x[ser_q], t)
    return out


def _boundaries(a, x, upper):
    """torch's values out of the regular region (NaN: a or x negative, both 0, both inf), and the mask
    of the regular region."""
    nan = (x < 0) | (a < 0) | ((a == 0) & ~(x > 0)) | (np.isinf(a) & np.isinf(x))
    lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)
    val = np.where(a == 0, hi, np.where(x == 0, lo, np.where(np.isinf(a), lo, hi)))
    edge = (a == 0) | (x == 0) | np.isinf(a) | np.isinf(x)
    val = np.where(nan, np.nan, val)
    return val, ~(nan | edge)


def _igamma_kernel(upper):
    def kernel(a, x):
        t = compute_dtype(a, x)
        aa, xa = np.broadcast_arrays(np.asarray(a), np.asarray(x))
        half = np.result_type(*[v for v in (a, x) if isinstance(v, np.ndarray)])
        shape = aa.shape
        a_, x_ = aa.astype(t).reshape(-1), xa.astype(t).reshape(-1)
        val, regular = _boundaries(a_, x_, upper)
        out = val.astype(t)
        idx = np.nonzero(regular)[0]     # (NaN operands reach the series: NaN, as torch's)
        if idx.size:
            ai, xi = a_[idx], x_[idx]
            with np.errstate(all="ignore"):
                if upper:
                    r = _igammac_core(ai, xi, t)
                else:
                    r = np.empty_like(ai)
                    asym = _regular(ai, xi, t)
                    if asym.any():
                        r[asym] = _asymptotic(ai[asym], xi[asym], t, True)
                    comp = ~asym & (xi > 1) & (xi > ai)
                    if comp.any():
                        r[comp] = t(1) - _igammac_core(ai[comp], xi[comp], t)
                    ser = ~asym & ~comp
                    if ser.any():
                        r[ser] = _igam_series(ai[ser], xi[ser], t)
            out[idx] = r
        out = out.reshape(shape)
        return out.astype(half) if half == np.float16 else out
    kernel.__name__ = "_igammac" if upper else "_igamma"
    return kernel


def _igamma_vjp(upper):
    name = "igammac" if upper else "igamma"

    def vjp(g, out, a, x):
        """torch's: none in a (its error when the backward runs), +-exp((a - 1) log x - x - lgamma(a))
        in x."""
        ga = None
        if isinstance(a, FrontEnd.Tensor):
            msg = f"the derivative for '{name}: input' is not implemented."
            ga = FrontEnd.apply(PRIMITIVES["derivative_error"], (g,), {"message": msg,
                                                                     "error": NotImplementedError(msg)})
        d = F.exp((a - 1) * F.log(x) - x - F.lgamma(a))
        return ga, (-g * d if upper else g * d)
    return vjp


for _upper in (False, True):
    _name = "igammac" if _upper else "igamma"
    binary(_name, _igamma_kernel(_upper), _igamma_vjp(_upper), "x y", needs={"x": "", "y": "x y"},
           refuse={k: _no_kernel(_name + "_cpu") for k in (0, 1)}, triton=_HOST)


# -- the reparameterized gamma draw --------------------------------------------------------------------

_upper_q = _igamma_kernel(True)


def _standard_gamma_grad(a, x):
    """dx/da of a Gamma(a, 1) draw x held at its quantile P(a, x) (the implicit function theorem:
    -(dP/da) / (dP/dx), dP/dx the density), as torch._standard_gamma_grad, in float64 and rounded
    to the operands' dtype. torch approximates it (a Taylor series below x = 0.8, a saddle-point
    expansion above a = 8, a fitted rational function between: relative errors up to ~1e-3, ~1e-2
    in far tails); this is the derivative itself, to ~1e-9 (see _implicit_for_large_a,
    _implicit_by_series and _implicit_by_differences). x = 0 gives the limit 0 (x < 0 too, as torch's), a <= 0 NaN."""
    dt = np.result_type(a, x)
    ad, xd = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    shape = ad.shape
    ad, xd = ad.reshape(-1), xd.reshape(-1)
    out = np.where(xd <= 0, 0.0, np.nan)
    ok = (xd > 0) & (ad > 0) & np.isfinite(xd) & np.isfinite(ad)
    with np.errstate(all="ignore"):
        z = (xd - ad) / np.sqrt(ad)
        large = ok & (ad >= 3e5) & (np.abs(z) <= 0.022 * np.sqrt(ad))
        below = ok & ~large & (xd <= ad)
        above = ok & ~large & (xd > ad)
        if large.any():
            out[large] = _implicit_for_large_a(ad[large], xd[large])
        if below.any():
            out[below] = _implicit_by_series(ad[below], xd[below])
        if above.any():
            out[above] = _implicit_by_differences(ad[above], xd[above])
    return out.reshape(shape).astype(dt)


def _implicit_by_series(a, x):
    """Where x <= a: P = x^a exp(-x) sum_n x^n / Gamma(a + n + 1) differentiated in a, over the
    density, is x sum_n c_n (psi(a + n + 1) - log x), c_n = x^n Gamma(a) / Gamma(a + n + 1).
    Every term is positive there (psi(a + 1) > log a >= log x), so the sum keeps its digits; the
    terms fall by x / (a + n), in about 9 sqrt(a) steps at x = a, fewer below."""
    lx = np.log(x)
    c = 1 / a
    psi = _digamma64(a + 1)
    total = c * (psi - lx)
    live = np.arange(a.size)
    eps = np.finfo(np.float64).eps
    for n in range(1, 100000):
        if not live.size:
            break
        al = a[live] + n
        c[live] *= x[live] / al
        psi[live] += 1 / al
        term = c[live] * (psi[live] - lx[live])
        total[live] += term
        live = live[~(term <= eps * total[live])]
    return x * total


def _implicit_by_differences(a, x):
    """Where x > a: dP/da = -dQ/da by a fourth-order central difference of Q (relatively accurate
    in the upper tail), with a step of 1e-3 of the scale on which Q varies in a (a; sqrt(a) above
    1; 1 / log(x / a) in a far tail), over the density x^(a-1) exp(-x) / Gamma(a) as igam computes
    it (no overflow where a is large). Good to ~1e-9 (checked to 30 digits up to a = 1e7, 120
    standard deviations out; large a near the mean takes _implicit_for_large_a). Where the
    density underflows (log density below -709: a draw of probability below e^-700) Q and the
    density are 0 and the quotient NaN, not a number made up."""
    h = 1e-3 / (1 / a + 1 / np.sqrt(a) + np.log(x / a))
    steps = np.array([1.0, -1.0, 2.0, -2.0])[:, None]
    q = _upper_q((a + steps * h).reshape(-1), np.broadcast_to(x, (4,) + x.shape).reshape(-1)).reshape(4, -1)
    dq = (8 * (q[0] - q[1]) - (q[2] - q[3])) / (12 * h)   # (the four points in one call of the kernel)
    return dq * x / _fac(a, x, np.float64)


def _implicit_for_large_a(a, x):
    """Where a >= 3e5 and x is within 0.022 sqrt(a) standard deviations of a: the Cornish-Fisher
    expansion of the gamma quantile, x = a + sqrt(a) z + (z^2 - 1) / 3 + (z^3 - 7 z) / (36 sqrt(a))
    + O(1 / a) (skewness 2 / sqrt(a), excess kurtosis 6 / a), differentiated in a at fixed z:
    1 + z / (2 sqrt(a)) - (z^3 - 7 z) / (72 a^1.5) + O(z^4 / a^2), with z solved from x to
    O(a^-1.5): within 1e-9 of the series of dx/da there (its error, ~4e-3 z^4 / a^2 as checked
    to 30 digits at a = 3e5, 1e6 and 1e7, is 1e-9 at that bound)."""
    r = np.sqrt(a)
    z = (x - a) / r
    for _ in range(3):
        z = (x - a - (z * z - 1) / 3 - (z ** 3 - 7 * z) / (36 * r)) / r
    return 1 + z / (2 * r) - (z ** 3 - 7 * z) / (72 * a * r)


def _standard_gamma_grad_vjp(g, out, a, x):
    """torch's: none (its error when the backward runs); the sample has no edge."""
    msg = "the derivative for '_standard_gamma_grad' is not implemented."
    return FrontEnd.apply(PRIMITIVES["derivative_error"], (g,), {"message": msg,
                                                                "error": NotImplementedError(msg)}), None


def _standard_gamma_vjp(g, out, a, sample):
    """torch's StandardGammaBackward0: grad * _standard_gamma_grad(alpha, result)."""
    return g * FrontEnd.apply(PRIMITIVES["_standard_gamma_grad"], (a, out), {}), None


def _float_kernels_only(op):
    """torch's refusals of a kernel built for float32 and float64 alone."""
    refuse = _no_kernel(op)
    return {0: refuse, 1: refuse, 2: lambda d, args: refuse(d, args) if d.itemsize < 4 else None}


binary("_standard_gamma_grad", _standard_gamma_grad, _standard_gamma_grad_vjp, "", dtype="same",
       grad_fn="StandardGammaGradBackward0", refuse=_float_kernels_only("_standard_gamma_grad_cpu"),
       edges=lambda metas: (0,), triton=_HOST).no_forward_ad = FORWARD_AD_NOT_IMPLEMENTED.format("_standard_gamma_grad")
# a Gamma(alpha, 1) draw made on the host (the front end's torch._standard_gamma) as a function of
# alpha: its value is the draw, its derivative the implicit one above
binary("_standard_gamma", lambda a, sample: np.array(sample, dtype=np.result_type(a), copy=True),
       _standard_gamma_vjp, "x out", dtype="same", grad_fn="StandardGammaBackward0",
       refuse=_float_kernels_only("gamma_cpu"), edges=lambda metas: (0,),
       triton=_HOST).no_forward_ad = FORWARD_AD_NOT_IMPLEMENTED.format("_standard_gamma")
